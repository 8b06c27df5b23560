# The session's last call (what the budget left): the two suites whose shared helper moved
# (GpuRoutes*, GpuFused*), then a 52-layer step over 16 sequences at 2,048 (per-layer cost
# inside a step, against the one-layer engine call). Carry [".carry/main"].
#   bash docs/bench/pending-main-2026-12-06/last.sh
set -u
mkdir -p /tmp/main
for b in ladder gpu_tests; do xz -dc .carry/main/$b.xz >/tmp/main/$b; done
chmod +x /tmp/main/*
start=$SECONDS
timeout 90 /tmp/main/gpu_tests --gtest_filter='*GpuRoutes*:*GpuFused*' >$OUT/suites.log 2>&1
echo "suites rc=$? $((SECONDS - start)) s" >$OUT/calls.txt
start=$SECONDS
timeout 90 /tmp/main/ladder bench --device cuda --batch 16 --batch-max-depth 2048 --depths none --step-depths 2048 \
  --no-fallback-step --output $OUT/b16step.json >$OUT/b16step.txt 2>$OUT/b16step.progress
echo "b16 step rc=$? $((SECONDS - start)) s" >>$OUT/calls.txt
