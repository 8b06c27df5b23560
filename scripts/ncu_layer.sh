#!/usr/bin/env bash
# Where a layer's time goes: the duration of each kernel of `ladder bench` single-layer rows at
# the clocks the bench runs at (ncu --clock-control none, one metric, so each launch is replayed
# once), on the GPU machine with the CLI carried (.carry/bench/bin/ladder, from
# `scripts/bench_device.sh prepare`):
#
#   scripts/ncu_layer.sh DEPTHS ROUTE...    # e.g. scripts/ncu_layer.sh 2048,131072 splitk/ring
#
# Extra environment (LADDER_GPU_FUSED=1 ...) passes through to the bench. Prints, per route and
# depth, each kernel's launches and median duration, then the bench's own per-layer time (the
# bench is run again without ncu): what the graph replay adds beyond the kernels' durations is
# the launch chain between dependent kernels. ncu serializes the launches, so its durations
# carry no overlap. Needs ncu on PATH or under /usr/local/cuda/bin.
set -uo pipefail
cd "$(dirname "$0")/.."
depths=${1:?usage: scripts/ncu_layer.sh DEPTHS ROUTE...}
shift
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
BIN=${LADDER_BIN:-.carry/bench/bin/ladder}
# The layer's kernels (the fill writes the planes with copies, not kernels).
KERNELS='regex:store_kernel|producer_tc_kernel|producer_kernel|reduce_kernel|fused_tc_kernel|copy_rows_kernel'
for route in "$@"; do
  for depth in ${depths//,/ }; do
    tag=$(echo "$route" | tr '/' '_')_$depth
    echo "== $route at $depth ${LADDER_GPU_FUSED:+(LADDER_GPU_FUSED=$LADDER_GPU_FUSED)}"
    "$NCU" --clock-control none --metrics gpu__time_duration.sum -k "$KERNELS" --launch-count 60 --csv \
      "$BIN" bench --device cuda --depths "$depth" --routes "$route" --step-depths none --no-engine --reps 5 --quiet \
      >"/tmp/ncu_layer_$tag.csv" 2>"/tmp/ncu_layer_$tag.err"
    python3 - "/tmp/ncu_layer_$tag.csv" <<'PY'
import csv, statistics, sys
lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
rows = list(csv.DictReader(lines))
by = {}
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0].split("<")[0].split("::")[-1]
    unit = r["Metric Unit"].strip().lower()
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit)
    if scale is None:
        sys.exit(f"unknown unit {unit!r} in {sys.argv[1]}")
    by.setdefault((name, r["Grid Size"]), []).append(float(r["Metric Value"].replace(",", "")) * scale)
if not by:
    print("no kernels profiled")
for (name, grid), d in by.items():
    print(f"  {name:28} grid {grid:>16} launches {len(d):3d} median {statistics.median(d):8.2f} us")
PY
    "$BIN" bench --device cuda --depths "$depth" --routes "$route" --step-depths none --no-engine --quiet 2>&1 |
      grep -E "^layer " | head -3
  done
done
