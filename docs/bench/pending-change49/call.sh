# Change 49 and its variants (docs/perf.md: change 49's prediction and outcome, change 49d's
# prediction). The patches stack on main: change49.patch (49: the fold chosen per entry inside
# the one batched kernel), change49c-on-49.patch (49b: the fold its own kernel instantiation;
# 49c: the direct reducer one kernel per parts count), change49d-on-49c.patch (49d: folding CTAs
# walk workgroups strided). A build is packed into a carry directory as ladder.xz and gpu_tests.xz
# (scripts/pack_carry.sh build-cuda DIR ladder=ladder ladder_gpu_tests=gpu_tests) plus one
# ladder_<variant>.xz per CLI a bench step compares (main's and each variant's). One device call
# per step, carry [DIR]:
#   STEPS=suite CARRY=DIR   the GPU suite of DIR's build, then the walk tests (the folded one among
#                           them) under the four sanitizers, into $OUT/suite.txt (on an H100 the
#                           suite alone takes ~190 s: SUITE_LIMIT=330 SAN_LIMIT=200)
#   STEPS=bench CARRY=DIR NAME=N VARIANTS="main 49d" DEPTHS=8192,32768 [ROUNDS=3] [FLAGS=...]
#                           DIR/ladder_<v>.xz for each v, interleaved rounds (bench_variants.sh),
#                           single layers at DEPTHS (splitk/ring) with FLAGS (default: batch-16
#                           layers there, the step and the engine's token at 2,048), into $OUT/N
#   STEPS=why CARRY=DIR VARIANTS="main 49d"
#                           each CLI's batch-16 rows alone under three depth lists (one round each,
#                           $OUT/why.txt), then ncu on the first batched producer launch at 8,192 and
#                           on the batched reducer behind it ($OUT/ncu.txt)
# Landed on main 2026-12-06 (docs/perf.md, change 49e on the H100): the four patches below are
# the record of how it was built; they no longer apply to main.
# change49e-on-49d.patch (49e: the occupancy query opts its kernel in first, and the fresh-process
# test GpuSlotWalk.FirstBatchedLaunchWalksInAFreshProcess) applies after the three above.
# What ran on the H200 (docs/bench/h200-2026-12-05-change49d/): the four sanitizers on main's
# build (pending-change45/suite.sh with LADDER_SAN_TOOLS ordered synccheck first) and on 49d's
# walk tests; suite on 49d; bench "main 49c 49d" under both lists (d-wide, d-narrow); why on
# "main 49d". Next: carry .carry/c49e (ladder_main, ladder_49d, ladder_49e, and 49e's ladder and
# gpu_tests), suite on 49e, then bench "main 49d 49e" under both lists.
# What ran (docs/bench/h100-2026-12-05-change49/): suite on 49; bench "main 49" at
# 2048,8192,32768,131072 (variants/), and at 8192,32768,131072 with FLAGS='--step-depths 2048
# --no-fallback-step --engine-max-depth 2048' and ROUNDS=5 (b1/: batch-1 rows only); bench
# "main 49b 49c" at 8192,32768 (split/).
set -u
source scripts/bench_lib.sh  # unpack_bin
# Batch-16 layers at the given depths, the step and the engine's token at 2,048 (bench and why).
batch16_flags='--batch 16 --step-depths 2048 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048'
carry=${CARRY:?carry directory} steps=${STEPS:?suite, bench or why}
walk_tests='GpuSlotWalk.FoldedWorkgroupsGiveTheReducerBits:GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuSlotWalk.ReduceFormsGiveTheSameBits'
case $steps in
  suite)
    bash docs/bench/pending-change45/suite.sh "$carry" "$(basename "$carry")"
    bash docs/bench/pending-change45/suite.sh "$carry" "$(basename "$carry")" "$walk_tests"
    ;;
  bench)
    bins=()
    for v in ${VARIANTS:?}; do bins+=("$carry/ladder_$v.xz"); done
    flags=${FLAGS:-$batch16_flags}
    mkdir -p "$OUT/${NAME:?}"
    # shellcheck disable=SC2086  # flags are words
    OUT=$OUT/$NAME timeout "${BENCH_LIMIT:-280}" scripts/bench_variants.sh "${ROUNDS:-3}" "${bins[@]}" -- \
      --depths "${DEPTHS:?}" --routes splitk/ring $flags >/dev/null 2>&1
    echo "$NAME rc=$?" >>"$OUT/suite.txt"
    ;;
  why)
    for v in ${VARIANTS:?}; do unpack_bin "$carry/ladder_$v.xz" >/dev/null; done
    for d in 8192 8192,32768 2048,8192; do
      for v in $VARIANTS; do
        echo "== $v $d"
        # shellcheck disable=SC2086  # flags are words
        timeout 40 "/tmp/ladder_$v" bench --depths "$d" --routes splitk/ring $batch16_flags 2>&1 | grep "batch 16"
      done
    done >"$OUT/why.txt"
    for v in $VARIANTS; do
      LADDER_BIN=/tmp/ladder_$v LADDER_NCU_BATCH=16 OUT=/tmp/ncu_why_$v timeout 70 scripts/ncu_producer.sh 8192 splitk/ring >/dev/null 2>&1
      LADDER_BIN=/tmp/ladder_$v LADDER_NCU_BATCH=16 LADDER_NCU_KERNEL=reduce LADDER_NCU_CACHE=none OUT=/tmp/ncu_why_$v \
        timeout 70 scripts/ncu_producer.sh 8192 splitk/ring >/dev/null 2>&1
      cat /tmp/ncu_why_"$v"/*.txt
    done >"$OUT/ncu.txt"
    ;;
  *) echo "call.sh: STEPS is suite, bench or why" >&2; exit 2 ;;
esac
