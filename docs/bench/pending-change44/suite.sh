# One variant's GPU suite on the device: unpacks .carry/c43/gpu_tests_V.xz and ladder_V.xz into
# /tmp/V, runs scripts/device_run.sh's tests step, and appends its result to $OUT/suite.txt.
#   bash docs/bench/pending-change44/suite.sh V     (V: d, f, g, ...)
set -u
v=${1:?variant letter}
mkdir -p /tmp/$v; xz -dc .carry/c43/gpu_tests_$v.xz >/tmp/$v/ladder_gpu_tests; xz -dc .carry/c43/ladder_$v.xz >/tmp/$v/ladder
chmod +x /tmp/$v/*
LADDER_BIN_DIR=/tmp/$v LADDER_STEPS=tests OUT=/tmp/run_$v timeout 200 scripts/device_run.sh >/dev/null 2>&1
echo "suite $v rc=$?" >>$OUT/suite.txt
{ cat /tmp/run_$v/progress.txt; find /tmp/run_$v -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -8; } >>$OUT/suite.txt 2>&1
