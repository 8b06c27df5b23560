#!/usr/bin/env bash
# The kernels timeline (diagnostic build, .carry/c84diag) of the groups, claimed and tail walks at
# 16 x 32,768, one archive back (tl3.tgz).
set -u
R=$OUT
for v in groups claimed tail; do
  LADDER_GPU_WALK=$v OUT=/tmp/tl/$v timeout 80 scripts/timeline_device.sh .carry/c84diag/ladder.xz \
    --depths 32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step --no-engine >/dev/null 2>&1
  echo "$v rc=$?" >> /tmp/tl/rc.txt
done
tar czf $R/tl3.tgz -C /tmp tl
cat /tmp/tl/rc.txt
