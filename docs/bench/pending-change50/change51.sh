# Change 51 (docs/perf.md: the fold's factors once per slot) in one device call, carry
# [".carry/main", ".carry/c51", ".carry/c5051"], most needed first: three interleaved rounds of
# main, 51 and change 50 with 51 (batch-16 layers at 2,048 / 8,192 / 32,768, the batch-1
# splitk/ring layer), then 51's GPU suite and its fold test under the four sanitizers (~330 s).
#   scripts/pack_carry.sh build-cuda .carry/c51 ladder=ladder ladder_gpu_tests=gpu_tests   (main + 51)
#   change50.patch + 51 built as ladder only: .carry/c5051
set -u
mkdir -p $OUT/variants
for v in main c51 c5051; do xz -dc .carry/$v/ladder.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
OUT=$OUT/variants timeout "${BENCH_LIMIT:-200}" scripts/bench_variants.sh "${ROUNDS:-3}" \
  /tmp/ladder_main /tmp/ladder_c51 /tmp/ladder_c5051 -- --depths 2048,8192,32768 --routes splitk/ring \
  --batch 16 --batch-max-depth 0 --step-depths none --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
SUITE_LIMIT=${SUITE_LIMIT:-240} bash docs/bench/pending-change45/suite.sh .carry/c51 c51
SAN_LIMIT=${SAN_LIMIT:-150} bash docs/bench/pending-change45/suite.sh .carry/c51 c51 \
  'GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits'
