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
summary() {  # the per-row medians of an ab.txt
  python3 - "$1" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
side = None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        # A round's header names its side; rows under any other header (another side, or the
        # medians table the script appends to its own file) are not counted.
        m = re.match(r"== (\S+) round", line)
        side = m.group(1) if m else None
        continue
    m = re.match(r"^(layer-batch|layer|step|engine)\s+(.+?)\s{2,}(\d+)\s+([\d.]+)\s", line)
    if side in ("A", "B") and m:
        runs[(m.group(1), m.group(2), m.group(3))][side].append(float(m.group(4)))
def spread(values):  # "lo-hi" over the rounds, or "-" for a side with no rows
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"
def apart(a, b):  # whether every round of one side is below every round of the other
    if not a or not b:
        return "-"
    return "yes" if max(a) < min(b) or max(b) < min(a) else "no"
print(f"{'kind':<12} {'case':<44} {'depth':>7} {'A us':>10} {'B us':>10} {'B/A':>6} "
      f"{'A lo-hi':>17} {'B lo-hi':>17} {'apart':>5}")
for key, sides in runs.items():
    a = statistics.median(sides["A"]) if sides["A"] else float("nan")
    b = statistics.median(sides["B"]) if sides["B"] else float("nan")
    print(f"{key[0]:<12} {key[1][:44]:<44} {key[2]:>7} {a:>10.2f} {b:>10.2f} {b / a:>6.3f} "
          f"{spread(sides['A']):>17} {spread(sides['B']):>17} {apart(sides['A'], sides['B']):>5}")
PY
}
if [[ ${1:-} == --summary ]]; then
  summary "$2"
  exit
fi
[[ $# -ge 3 ]] || { echo "usage: scripts/bench_ab.sh A_BIN B_BIN ROUNDS [ladder bench flags...]" >&2; exit 2; }
: "${OUT:=$PWD/ab-out}"
mkdir -p "$OUT"
unpack() {  # a path to an executable, unpacking NAME.xz to /tmp/NAME
  if [[ $1 == *.xz ]]; then
    local dst
    dst=/tmp/$(basename "${1%.xz}")
    xz -dc "$1" >"$dst" && chmod +x "$dst" && echo "$dst"
  else
    echo "$1"
  fi
}
a=$(unpack "$1")
b=$(unpack "$2")
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
