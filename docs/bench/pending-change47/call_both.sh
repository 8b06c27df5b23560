# Changes 47, 48 and probe 49 in one device call, for a session short of device time (what ran on
# 2026-12-05): call_bench.sh at two rounds, splitk/ring for the batch-1 rows, then change 47's GPU
# suite (no sanitizers: call_suite.sh has them). Carry [".carry/c47", ".carry/v2", ".carry/p49"];
# ~9 min.
set -u
ROUNDS=2 ROUTES=splitk/ring BENCH_LIMIT=340 bash docs/bench/pending-change47/call_bench.sh
bash docs/bench/pending-change45/suite.sh .carry/c47 c47
