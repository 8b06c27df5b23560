# Changes 47, 48 and probe 49 in one device call, for a session short of device time: the bench
# variants of call_bench.sh at two rounds (splitk/ring for the batch-1 rows), then change 47's GPU
# suite (no sanitizers: call_suite.sh has them). Carry [".carry/c47", ".carry/v2", ".carry/p49"];
# ~9 min.
set -u
bash docs/bench/pending-change47/unpack.sh
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 340 scripts/bench_variants.sh 2 /tmp/ladder_slot /tmp/ladder_walk /tmp/ladder_l2 /tmp/ladder_p49 -- \
  --depths 2048,8192,32768,131072 --routes splitk/ring --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
bash docs/bench/pending-change45/suite.sh .carry/c47 c47
