#!/bin/bash
# Why batch 64 reads less per byte than batch 16 (perf.md, 2026-12-07 late morning: 0.62 against
# 0.71 of the ceiling at 8,192, 0.72 against 0.88 at 32,768, 0.82 against 0.94 at 131,072). One
# device call with the CLI carried (.carry/bench, from `scripts/bench_device.sh prepare`):
#   1. each kernel of the batched layer, ncu-serialized (duration, DRAM bytes read and written),
#      at batch 16 and 64, depths 8,192 and 32,768 (the ring layer's row);
#   2. the bench's own layer-batch rows at the same points (graph replay, no ncu);
#   3. ncu's details page of the batched producer at 16 and 64 x 32,768 (scripts/ncu_producer.sh).
# Everything under $OUT comes back as one archive.
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:?run through the device tool}
w=/tmp/b64
mkdir -p "$w"
# What is done comes back even when the call's limit cuts the script (timeout signals the group).
trap 'tar czf "$R/b64.tgz" -C /tmp b64' EXIT
trap 'exit 143' TERM
BIN=${LADDER_BIN:-.carry/bench/bin/ladder}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for d in 8192 32768; do
  for b in 16 64; do
    # The ring (swa) layer-batch row runs first: its steady-state launches of the batched
    # producer and reducer (the single-layer rows before it launch the direct kernels).
    tag=${b}_${d}
    timeout 120 "$NCU" --clock-control none --metrics "$METRICS" \
      -k 'regex:producer_tc_kernel_indirect|reduce_kernel_indirect' --launch-skip 10 --launch-count 20 --csv \
      "$BIN" bench --device cuda --depths "$d" --routes splitk/ring --step-depths none --batch "$b" \
      --batch-max-depth 0 --no-engine --reps 5 --quiet >"$w/k_$tag.csv" 2>"$w/k_$tag.err"
    echo "k_$tag rc=$?" >>"$w/progress.txt"
  done
done
# Batch 64 at 2,048: the growing row took 95.6 us against the ring's 66.3. Both rows' launches (one
# timed repetition each), each kernel and grid in the order of its first launch.
timeout 150 "$NCU" --clock-control none --metrics "$METRICS" \
  -k 'regex:producer_tc_kernel_indirect|reduce_kernel_indirect|producer_kernel_indirect|copy_rows_kernel_indirect|store_kernel_indirect' \
  --launch-count 400 --csv "$BIN" bench --device cuda --depths 2048 --routes splitk/ring --step-depths none --batch 64 \
  --batch-max-depth 0 --no-engine --reps 1 --quiet >"$w/k_64_2048_both.csv" 2>"$w/k_64_2048_both.err"
echo "k_64_2048_both rc=$?" >>"$w/progress.txt"
python3 - "$w" >"$w/kernels.txt" <<'PY'
import csv, glob, os, statistics, sys
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "k_*.csv"))):
    lines = [l for l in open(f, errors="replace") if l.startswith('"')]
    by = {}
    for r in csv.DictReader(lines):
        name = r["Kernel Name"].split("(")[0].split("<")[0].split("::")[-1]
        key = (name, r["Grid Size"], r["ID"])
        v = float(r["Metric Value"].replace(",", "") or 0)
        m = r["Metric Name"]
        if m == "gpu__time_duration.sum":
            v *= scale[r["Metric Unit"].strip().lower()]
        elif m.startswith("dram__bytes"):
            v *= {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9}[r["Metric Unit"].strip().lower()]
        by.setdefault(key, {})[m] = v
    per = {}
    # In order of each (kernel, grid)'s first launch: the ring row's launches come first.
    for (name, grid, _), ms in sorted(by.items(), key=lambda kv: int(kv[0][2])):
        per.setdefault((name, grid), []).append(ms)
    print(f"== {os.path.basename(f)}")
    for (name, grid), lst in per.items():
        med = lambda m: statistics.median(x.get(m, 0.0) for x in lst)
        t = med("gpu__time_duration.sum")
        rd = med("dram__bytes_read.sum")
        wr = med("dram__bytes_write.sum")
        print(f"  {name:34} grid {grid:>16} n {len(lst):3d} {t:9.2f} us  read {rd/1e6:9.2f} MB"
              f"  write {wr/1e6:7.2f} MB  {rd/max(t,1e-9)/1e6:7.1f} GB/s  L2 hit {med('lts__t_sector_hit_rate.pct'):5.1f} %")
PY
timeout 150 "$BIN" bench --device cuda --depths 8192,32768 --step-depths none --batch 16,64 --batch-max-depth 0 \
  --no-engine >"$w/bench.txt" 2>&1
echo "bench rc=$?" >>"$w/progress.txt"
for b in 16 64; do
  OUT=$w LADDER_NCU_BATCH=$b timeout 150 bash scripts/ncu_producer.sh 32768 splitk/ring
  echo "ncu_producer batch $b rc=$?" >>"$w/progress.txt"
done
