# One build's GPU suite on the device, for the change-45/46 calls: unpacks CARRY/ladder.xz and
# CARRY/gpu_tests.xz into /tmp/NAME, runs scripts/device_run.sh's tests step and appends its
# result to $OUT/suite.txt. With a third argument, runs instead the sanitizer step on that gtest
# filter (the environment passes through: LADDER_GPU_TILES=swizzled, say).
#   bash docs/bench/pending-change45/suite.sh .carry/c45 c45
#   bash docs/bench/pending-change45/suite.sh .carry/c45 c45 'GpuRoutes.SwizzledTilesGiveThePaddedBits'
set -u
carry=${1:?carry dir} name=${2:?name} filter=${3:-}
mkdir -p /tmp/$name
[[ -x /tmp/$name/ladder_gpu_tests ]] || {
  xz -dc $carry/ladder.xz >/tmp/$name/ladder
  xz -dc $carry/gpu_tests.xz >/tmp/$name/ladder_gpu_tests
  chmod +x /tmp/$name/*
}
if [[ -z $filter ]]; then
  LADDER_BIN_DIR=/tmp/$name LADDER_STEPS=tests OUT=/tmp/run_$name timeout ${SUITE_LIMIT:-240} scripts/device_run.sh >/dev/null 2>&1
  echo "suite $name rc=$?" >>$OUT/suite.txt
  { cat /tmp/run_$name/progress.txt; find /tmp/run_$name -name 'gpu_tests*.log' | head -1 | xargs grep -E "PASSED|FAILED|Swizzled|max rel" | tail -14; } >>$OUT/suite.txt 2>&1
else
  san=/tmp/san_${name}_$(date +%s%N)
  LADDER_SAN_FILTER=$filter LADDER_BIN_DIR=/tmp/$name LADDER_STEPS=san OUT=$san timeout ${SAN_LIMIT:-150} scripts/device_run.sh >/dev/null 2>&1
  echo "san $name ${LADDER_GPU_TILES:+(LADDER_GPU_TILES=$LADDER_GPU_TILES) }rc=$?" >>$OUT/suite.txt
  cat $san/progress.txt >>$OUT/suite.txt 2>&1
fi
