#!/usr/bin/env bash
# Where one batched layer's GPU time goes, kernel by kernel, on the GPU machine:
#   scripts/kernel_breakdown.sh BIN_DIR OUT_FILE [BATCHES] [DEPTHS]
# runs `ladder bench`'s layer-batch rows (one layer over B sequences through the engine, device
# memory) under ncu with one metric (gpu__time_duration.sum: one replay pass per kernel), then
# bench/kernel_times.py groups the launches by (kernel, grid). Fills run too (they are how the
# rows reach their depth); their store and count launches form their own groups by count.
# Then `--set full` on one batched producer launch for stall reasons, occupancy and DRAM.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$1 OUTF=$2 BATCHES=${3:-1,16} DEPTHS=${4:-2048}
tmp=$(mktemp -d)
{
  echo "== ncu gpu__time_duration.sum, ladder bench layer-batch rows, batches $BATCHES, depths $DEPTHS"
  ncu --csv --metrics gpu__time_duration.sum "$BIN/ladder" bench --device cuda --depths "$DEPTHS" \
      --step-depths none --routes vec/ring --batch "$BATCHES" --no-engine --reps 5 --quiet \
      >"$tmp/times.csv" 2>"$tmp/times.err"
  echo "ncu rc=$?"; tail -3 "$tmp/times.err"
  python3 bench/kernel_times.py "$tmp/times.csv"
  echo "== ncu --set full, the 3rd producer_tc launch with grid z > 1 (batched), depth ${DEPTHS%%,*}"
  ncu --set full -k regex:producer_tc_kernel_indirect --launch-skip 4 --launch-count 1 \
      "$BIN/ladder" bench --device cuda --depths "${DEPTHS%%,*}" --step-depths none --routes vec/ring \
      --batch "${BATCHES##*,}" --no-engine --reps 3 --quiet 2>&1 | grep -vE '^==PROF==' | tail -150
} >"$OUTF" 2>&1
