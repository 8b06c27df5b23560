# Change 44 (docs/perf.md, probe F: kTcStages 2, kTcCtasPerSm 3): one call, F's GPU suite, the
# four sanitizers on the tensor-core pipeline's tests, then A (main), D (change 43 variant D) and
# F interleaved, three rounds. Build F as pending-change43/call.sh says, from main with the two
# constants changed (f.patch here), and pack it: scripts/pack_carry.sh BUILD .carry/c43
# ladder=ladder_f ladder_gpu_tests=gpu_tests_f. Carry [".carry/c43"]; ~6 min.
# `call_f.sh g` does the same for G (D's patch plus F's two constants: gpu_tests_g, ladder_g).
set -u
v=${1:-f}
bash docs/bench/pending-change44/suite.sh "$v"
LADDER_SAN_FILTER='GpuFullRing.TensorCoreEveryRouteSameBits:GpuFused.StoreFusedReducerWaitsForItsProducers:GpuSlotWalk.SlotsPerCtaNeverChangeBits:GpuFused.ArrivalOrderNeverChangesBits' \
  LADDER_BIN_DIR=/tmp/$v LADDER_STEPS=san OUT=/tmp/san_$v timeout 100 scripts/device_run.sh >/dev/null 2>&1
echo "san $v rc=$?" >>$OUT/suite.txt
cat /tmp/san_$v/progress.txt >>$OUT/suite.txt 2>&1
for w in a d $v; do xz -dc .carry/c43/ladder_$w.xz >/tmp/ladder_$w; chmod +x /tmp/ladder_$w; done
mkdir -p $OUT/variants
OUT=$OUT/variants timeout 250 scripts/bench_variants.sh 3 /tmp/ladder_a /tmp/ladder_d /tmp/ladder_$v -- --depths 2048,8192,32768,131072 --routes splitk/ring,vec/growing --batch 16 --step-depths 2048,32768 --batch-max-depth 0 --no-fallback-step --engine-max-depth 2048 >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/suite.txt
