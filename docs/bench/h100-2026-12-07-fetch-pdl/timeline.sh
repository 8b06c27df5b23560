#!/usr/bin/env bash
# Does a batched call's first producer start while the state fetch runs (change 38's PDL behind
# the fetch)? Every batch-16 timeline since 2026-12-04 put its first CTA's entry mark 1.0-1.3 us
# after the fetch's exit; that mark follows the PDL wait in this launch (docs/gpu.md), which the
# run below showed. The kernels' timeline (diagnostic build, carried as DIAG, default
# .carry/maindiag: main's diagnostic build, ebfb86b's as run on 2026-12-07 23:49Z) of the
# batch-16 layer at 2,048 with PDL on (the default) and off (LADDER_GPU_PDL=0). One archive back.
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:?run through the device tool}
for pdl in 1 0; do
  LADDER_GPU_PDL=$pdl OUT=/tmp/fetch-pdl/pdl$pdl timeout 60 scripts/timeline_device.sh "${DIAG:-.carry/maindiag/ladder.xz}" \
    --depths 2048 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step --no-engine \
    >/dev/null 2>&1
  echo "pdl=$pdl rc=$?" >>/tmp/fetch-pdl/rc.txt
done
tar czf "$R/fetch-pdl.tgz" -C /tmp fetch-pdl
grep -h "state fetch exit" /tmp/fetch-pdl/pdl*/timeline-summary.txt
