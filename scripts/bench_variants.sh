#!/usr/bin/env bash
# Timing of several `ladder` variants, interleaved so that drift in clocks or neighbours falls on
# all of them: each round runs every variant once, in the order given, `ladder bench --device
# cuda` (or LADDER_AB_DEVICE) with the same flags. A variant is an executable: a `ladder` binary
# (NAME.xz is unpacked to /tmp first) or a wrapper script that sets an environment variable and
# execs one; its name is the file's base name. Writes every run's table to $OUT/variants.txt (a
# header line "== NAME round R"), then the median of each row's median_us over the rounds per
# variant and its ratio to the first variant's, which it also prints. bench_ab.sh is the
# two-sided form with spreads; this one is for a sweep of probes in one device call.
#
#   scripts/bench_variants.sh ROUNDS VARIANT... -- [ladder bench flags...]
#   e.g. scripts/bench_variants.sh 2 /tmp/ladder /tmp/empty /tmp/skip -- --depths 2048 --step-depths none
#   scripts/bench_variants.sh --summary FILE   (the table again from a variants.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_lib.sh
summary() { python3 scripts/bench_rounds.py variants "$1"; }
if [[ ${1:-} == --summary ]]; then
  summary "$2"
  exit
fi
usage() { sed -n '11,13p' "$0" >&2; exit 2; }
[[ $# -ge 3 && $1 =~ ^[0-9]+$ ]] || usage
rounds=$1
shift
variants=()
while [[ $# -gt 0 && $1 != -- ]]; do
  variants+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift  # the --
[[ ${#variants[@]} -ge 1 ]] || usage
: "${OUT:=$PWD/variants-out}"
mkdir -p "$OUT"
bins=()
for v in "${variants[@]}"; do
  b=$(unpack_bin "$v")
  [[ -x $b ]] || { echo "bench_variants.sh: $v is not executable" >&2; exit 2; }
  bins+=("$b")
done
names=()
for b in "${bins[@]}"; do
  n=$(basename "$b")
  for seen in "${names[@]}"; do
    [[ $seen != "$n" ]] || { echo "bench_variants.sh: two variants named $n" >&2; exit 2; }
  done
  names+=("$n")
done
log=$OUT/variants.txt
: >"$log"
for ((r = 1; r <= rounds; r++)); do
  for i in "${!bins[@]}"; do
    echo "== ${names[$i]} round $r ($(date -u +%H:%M:%SZ)): ${bins[$i]}" | tee -a "$log" >&2
    "${bins[$i]}" bench --device "${LADDER_AB_DEVICE:-cuda}" --quiet "$@" >>"$log" 2>&1 ||
      echo "== (exit $? from ${names[$i]} round $r)" >>"$log"
  done
done
summary "$log" | tee "$OUT/variants-summary.txt"
