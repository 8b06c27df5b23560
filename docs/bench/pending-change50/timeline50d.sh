# Where batch 1's +0.2 us at 2,048 went with change 50 (docs/perf.md, "Timeline of main against
# change 50 at batch 1"): the kernels' own timeline (diagnostic builds, -DLADDER_DIAG_TIMELINE=ON)
# of main before it (24a7f63) and of e55326d, the batch-1 splitk/ring layer and one batch-16 layer
# at 2,048, carry [".carry/diag-c51", ".carry/diag-c50d"].
#   git worktree add /tmp/wt-c51 24a7f63     (and /tmp/wt-c50d at e55326d)
#   cmake -S /tmp/wt-c51 -B /tmp/wt-c51/build-diag -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=ON \
#     -DLADDER_DIAG_TIMELINE=ON -DLADDER_BUILD_TESTS=OFF && ninja -C /tmp/wt-c51/build-diag ladder
#   (cd /tmp/wt-c51 && /work/main/scripts/pack_carry.sh build-diag /work/main/.carry/diag-c51 ladder=ladder)
set -u
for v in c51 c50d; do
  OUT=$OUT/$v timeout 120 scripts/timeline_device.sh .carry/diag-$v/ladder.xz --depths 2048 \
    --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
  echo "timeline $v rc=$?" >>$OUT/rc.txt
done
