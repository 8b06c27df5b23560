# The kernels' own timeline (diagnostic builds, -DLADDER_DIAG_TIMELINE=ON) of two or more builds,
# the batch-1 splitk/ring layer and one batch-16 layer at 2,048, carry [".carry/diag-NAME", ...]:
#   bash docs/bench/pending-change50/timeline.sh p50 c50    where probe 50's batch-16 saving went
#                                                           in change 50 (docs/perf.md)
#   bash docs/bench/pending-change50/timeline.sh c51 c50d   where batch 1's +0.2 us at 2,048 went
#                                                           (main 24a7f63 against e55326d)
# A build NAME at commit C:
#   git worktree add /tmp/wt-NAME C   (for p50/c50: main plus probe50.patch / change50.patch)
#   cmake -S /tmp/wt-NAME -B /tmp/wt-NAME/build-diag -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=ON \
#     -DLADDER_DIAG_TIMELINE=ON -DLADDER_BUILD_TESTS=OFF && ninja -C /tmp/wt-NAME/build-diag ladder
#   (cd /tmp/wt-NAME && /work/main/scripts/pack_carry.sh build-diag /work/main/.carry/diag-NAME ladder=ladder)
set -u
[[ $# -ge 1 ]] || { sed -n '1,11p' "$0" >&2; exit 2; }
for v in "$@"; do
  OUT=$OUT/$v timeout 120 scripts/timeline_device.sh .carry/diag-$v/ladder.xz --depths 2048 \
    --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
  echo "timeline $v rc=$?" >>$OUT/rc.txt
done
