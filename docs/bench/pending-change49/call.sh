# Change 49 (docs/perf.md): a walking CTA of a batched tensor-core launch folds whole workgroups
# itself (one partial per workgroup), the reducer's step 4 a left fold. Built into .carry/c49
# (ladder.xz, gpu_tests.xz: scripts/pack_carry.sh build-cuda .carry/c49 ladder=ladder
# ladder_gpu_tests=gpu_tests) with main's CLI beside it as .carry/c49/ladder_main.xz. Two calls
# on an H100 (the suite alone ~200 s there): STEPS=suite (the GPU suite, then the four
# sanitizers on the walk tests, the folded one among them), then STEPS=variants (main against
# change 49, three rounds: batch-1 layers, steps, the engine's token, batch 16). STEPS=b1: the
# batch-1 rows only (layers at 8,192-131,072, steps and the engine's token), five rounds, into
# $OUT/b1. Carry [".carry/c49"].
# STEPS=split (carry [".carry/c49x"]: ladder_main.xz, ladder_49b.xz: the folding walk its own
# kernel instantiation, ladder_49c.xz: and the direct reducer one kernel per parts count,
# gpu_tests_49c.xz): the three CLIs, three rounds, batch-1 and batch-16 layers at 8,192 and 32,768, the step and token,
# into $OUT/split; then, in what time is left, 49c's walk and route tests.
set -u
steps=${STEPS:-suite variants}
# Change 49d (change49d.patch, built into .carry/c49d: ladder.xz, gpu_tests.xz, with
# ladder_main.xz and ladder_49c.xz beside them; carry [".carry/c49d"]): STEPS=d-suite, the GPU
# suite and the walk tests under the four sanitizers; then STEPS=d-variants, main, 49c and 49d,
# three rounds with the depths 2,048-131,072 and three with 8,192-32,768 (the two lists under
# which main's batch-16 rows at 8,192 swapped), into $OUT/d-wide and $OUT/d-narrow.
if [[ $steps == d-suite ]]; then
  bash docs/bench/pending-change45/suite.sh .carry/c49d c49d
  bash docs/bench/pending-change45/suite.sh .carry/c49d c49d \
    'GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuSlotWalk.ReduceFormsGiveTheSameBits'
  exit 0
fi
if [[ $steps == d-variants ]]; then
  xz -dc .carry/c49d/ladder_main.xz >/tmp/ladder_main && xz -dc .carry/c49d/ladder_49c.xz >/tmp/ladder_49c &&
    xz -dc .carry/c49d/ladder.xz >/tmp/ladder_49d && chmod +x /tmp/ladder_main /tmp/ladder_49c /tmp/ladder_49d
  for list in wide:2048,8192,32768,131072 narrow:8192,32768; do
    mkdir -p $OUT/d-${list%%:*}
    OUT=$OUT/d-${list%%:*} timeout 250 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_49c /tmp/ladder_49d -- \
      --depths ${list#*:} --routes splitk/ring --batch 16 --step-depths 2048 --batch-max-depth 0 \
      --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
    echo "d-${list%%:*} rc=$?" >>$OUT/suite.txt
  done
  exit 0
fi
# STEPS=ring (carry [".carry/c49y"]: ladder_main.xz, ladder_49.xz, ladder_49b.xz): batch-16 layers
# at 2,048 and 8,192 only, three rounds, into $OUT/ring: whether the fold's launch argument
# (49) and its template instantiation (49b) time alike on the ring at 8,192.
if [[ $steps == ring ]]; then
  for v in main 49 49b; do xz -dc .carry/c49y/ladder_$v.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
  mkdir -p $OUT/ring
  OUT=$OUT/ring timeout 100 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_49 /tmp/ladder_49b -- \
    --depths 2048,8192 --routes splitk/ring --batch 16 --step-depths none --batch-max-depth 0 --no-engine \
    >/dev/null 2>&1
  echo "ring rc=$?" >>$OUT/suite.txt
  exit 0
fi
if [[ $steps == split ]]; then
  for v in main 49b 49c; do xz -dc .carry/c49x/ladder_$v.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
  mkdir -p $OUT/split
  OUT=$OUT/split timeout 200 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_49b /tmp/ladder_49c -- \
    --depths 8192,32768 --routes splitk/ring --batch 16 --step-depths 2048 --batch-max-depth 0 \
    --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
  echo "split rc=$?" >>$OUT/suite.txt
  xz -dc .carry/c49x/gpu_tests_49c.xz >/tmp/gpu_tests_49c && chmod +x /tmp/gpu_tests_49c
  timeout ${TESTS_LIMIT:-60} /tmp/gpu_tests_49c --gtest_filter='GpuSlotWalk.Folded*:GpuSlotWalk.SlotsPerCta*:GpuRoutes.*' \
    >$OUT/split/tests.txt 2>&1
  echo "tests rc=$?" >>$OUT/suite.txt
  exit 0
fi
mkdir -p /tmp/c49
if [[ $steps == *suite* ]]; then
  bash docs/bench/pending-change45/suite.sh .carry/c49 c49
  bash docs/bench/pending-change45/suite.sh .carry/c49 c49 \
    'GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuSlotWalk.ReduceFormsGiveTheSameBits'
fi
[[ $steps == *variants* || $steps == *b1* ]] || exit 0
xz -dc .carry/c49/ladder_main.xz >/tmp/ladder_main && chmod +x /tmp/ladder_main
xz -dc .carry/c49/ladder.xz >/tmp/ladder_49 && chmod +x /tmp/ladder_49
if [[ $steps == *b1* ]]; then
  mkdir -p $OUT/b1
  OUT=$OUT/b1 timeout 300 scripts/bench_variants.sh 5 /tmp/ladder_main /tmp/ladder_49 -- \
    --depths 8192,32768,131072 --routes splitk/ring --step-depths 2048 --no-fallback-step \
    --engine-max-depth 2048 >/dev/null 2>&1
  echo "b1 rc=$?" >>$OUT/suite.txt
fi
[[ $steps == *variants* ]] || exit 0
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 300 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_49 -- \
  --depths 2048,8192,32768,131072 --routes splitk/ring --batch 16 --step-depths 2048 \
  --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
