# Where probe 50's batch-16 saving at 2,048 went in change 50 (docs/perf.md, change 50's
# outcome): the kernels' own timeline (diagnostic builds, -DLADDER_DIAG_TIMELINE=ON) of the probe
# and of change50.patch, one batch-16 layer at 2,048, carry [".carry/diag-p50", ".carry/diag-c50"].
#   git worktree add /tmp/wt-p50 HEAD && (cd /tmp/wt-p50 && git apply docs/bench/pending-change50/probe50.patch)
#   cmake -S /tmp/wt-p50 -B /tmp/wt-p50/build-diag -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=ON \
#     -DLADDER_DIAG_TIMELINE=ON && ninja -C /tmp/wt-p50/build-diag ladder
#   (cd /tmp/wt-p50 && /work/main/scripts/pack_carry.sh build-diag /work/main/.carry/diag-p50 ladder=ladder)
#   and the same for change50.patch into .carry/diag-c50.
set -u
for v in p50 c50; do
  OUT=$OUT/$v timeout 120 scripts/timeline_device.sh .carry/diag-$v/ladder.xz --depths 2048 \
    --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
  echo "timeline $v rc=$?" >>$OUT/rc.txt
done
