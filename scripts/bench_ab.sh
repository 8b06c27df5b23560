#!/usr/bin/env bash
# A/B timing of two `ladder` binaries, alternated so that drift in clocks or neighbours falls on
# both: A, B, A, B, ... for ROUNDS rounds, each `ladder bench --device cuda` (or the device that
# LADDER_AB_DEVICE names: `cpu` for the CPU rows, here or on the GPU machine's host) with the
# same flags. Writes each run's table under $OUT/ab.txt (a header line names the binary
# and round), then the median of every row's median_us over the rounds, per binary, with each
# side's lowest and highest round and whether the two sides' rounds do not overlap at all
# ("apart": every round of one side below every round of the other), which it also prints
# (`scripts/bench_ab.sh --summary FILE` prints that table again from an ab.txt).
#
#   scripts/bench_ab.sh A_BIN B_BIN ROUNDS [ladder bench flags...]
#   e.g. scripts/bench_ab.sh /tmp/ladder_base .carry/bench/bin/ladder 2 --depths 2048,131072 --step-depths none
#
# A binary given as NAME.xz is unpacked to /tmp first (carried binaries are xz'd to fit the
# device tool's 64 MiB carry limit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
summary() { python3 scripts/bench_rounds.py ab "$1"; }  # the per-row medians of an ab.txt
if [[ ${1:-} == --summary ]]; then
  summary "$2"
  exit
fi
[[ $# -ge 3 ]] || { echo "usage: scripts/bench_ab.sh A_BIN B_BIN ROUNDS [ladder bench flags...]" >&2; exit 2; }
: "${OUT:=$PWD/ab-out}"
mkdir -p "$OUT"
a=$(unpack_bin "$1")
b=$(unpack_bin "$2")
rounds=$3
shift 3
: >"$OUT/ab.txt"
for ((r = 1; r <= rounds; ++r)); do
  for side in A B; do
    bin=$a
    [[ $side == B ]] && bin=$b
    echo "== $side round $r: $bin" >>"$OUT/ab.txt"
    "$bin" bench --device "${LADDER_AB_DEVICE:-cuda}" --quiet "$@" >>"$OUT/ab.txt" 2>&1 || echo "== $side round $r failed (exit $?)" >>"$OUT/ab.txt"
  done
done
summary "$OUT/ab.txt" | tee "$OUT/ab_summary.txt"
{ echo "== medians over the rounds"; cat "$OUT/ab_summary.txt"; } >>"$OUT/ab.txt"
