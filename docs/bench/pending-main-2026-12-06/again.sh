# The second call, after once.sh's suite and the fresh-process test under the sanitizers both
# ran past their limits without a word: that test alone (its gtest log), ladder's batch-16 rows
# (the table's bench ran without --batch), then the whole suite through gtest itself, so a
# hang shows which test it is in. Carry [".carry/main"].
#   bash docs/bench/pending-main-2026-12-06/again.sh
set -u
mkdir -p /tmp/main
for b in ladder gpu_tests; do xz -dc .carry/main/$b.xz >/tmp/main/$b; done
chmod +x /tmp/main/*
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >$OUT/gpu.txt
start=$SECONDS
timeout 90 /tmp/main/gpu_tests --gtest_filter=GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess >$OUT/fresh.log 2>&1
echo "fresh rc=$? $((SECONDS - start)) s" >>$OUT/gpu.txt
start=$SECONDS
timeout 150 /tmp/main/ladder bench --device cuda --batch 16 --batch-max-depth 0 --routes none --no-engine \
  --no-fallback-step --step-depths 2048,8192,32768,131072 --output $OUT/b16.json >$OUT/b16.txt 2>$OUT/b16.progress
echo "b16 rc=$? $((SECONDS - start)) s" >>$OUT/gpu.txt
start=$SECONDS
timeout ${SUITE_LIMIT:-240} /tmp/main/gpu_tests --gtest_filter='-GpuPerf.*' >$OUT/suite.log 2>&1
echo "suite rc=$? $((SECONDS - start)) s" >>$OUT/gpu.txt
