# One call for both pending GPU probes: variant D's GPU suite (pending-change43/call_d.sh's first
# half), then call_f.sh (F's suite and sanitizers, then A, D and F interleaved). Carry
# [".carry/c43"]; ~8 min. `call_df.sh g`: G (D + F) in F's place.
set -u
mkdir -p /tmp/d; xz -dc .carry/c43/gpu_tests_d.xz >/tmp/d/ladder_gpu_tests; xz -dc .carry/c43/ladder_d.xz >/tmp/d/ladder
chmod +x /tmp/d/*
LADDER_BIN_DIR=/tmp/d LADDER_STEPS=tests OUT=/tmp/run_d timeout 150 scripts/device_run.sh >/dev/null 2>&1
echo "suite d rc=$?" >>$OUT/suite.txt
{ cat /tmp/run_d/progress.txt; find /tmp/run_d -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED" | tail -8; } >>$OUT/suite.txt 2>&1
bash docs/bench/pending-change44/call_f.sh "${1:-f}"
