#!/usr/bin/env bash
# The whole GPU-machine run in one command: build (or use binaries carried from the build
# machine), the GPU test suite, compute-sanitizer memcheck/racecheck/initcheck/synccheck over the
# reduced sweep, `ladder demo --device cuda` and `ladder parity --device cuda`, the first
# per-route timings. Logs go to $OUT (or ./device_out). Every step runs even when an earlier
# one fails; the script exits non-zero if any step failed, and prints a summary table last.
#
#   LADDER_BIN_DIR   directory holding ladder_gpu_tests (and ladder); default: .carry/bin if it
#                    exists, else a fresh build in build-device/
#   LADDER_STEPS     comma list of steps to run: tests,san,cli,perf (default: all four)
#   LADDER_SAN_TIMEOUT  seconds each sanitizer may run (default 480)
set -uo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/device_out}"
mkdir -p "$OUT"
# Steps log here; at the end they are gathered into a few files under $OUT (the device tool
# brings back at most 8 files).
LOG="$(mktemp -d)"
declare -a SUMMARY=()
FAILED=0

STEPS=",${LADDER_STEPS:-tests,san,cli,perf},"
want() { [[ "$STEPS" == *",$1,"* ]]; }

step() {  # step NAME LOGFILE COMMAND...
  local name="$1" log="$2"
  shift 2
  local start=$SECONDS
  "$@" >"$LOG/$log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-26s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - start))" "$log")")
  if [ "$rc" -ne 0 ]; then FAILED=1; fi
  return 0
}

{
  date -u '+date: %Y-%m-%dT%H:%M:%SZ'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
} >"$OUT/device.txt"

BIN="${LADDER_BIN_DIR:-}"
if [ -z "$BIN" ]; then
  if [ -x .carry/bin/ladder_gpu_tests ]; then
    BIN=.carry/bin
  else
    step build build.log bash -c 'cmake -S . -B build-device -G Ninja -DLADDER_CUDA=ON && ninja -C build-device'
    BIN=build-device
  fi
fi

TESTS="$BIN/ladder_gpu_tests"
# The perf suite only runs with LADDER_GPU_PERF=1; keep it out of the correctness passes.
FILTER='-GpuPerf.*'
# The out-of-memory test asks the driver for 512 GiB; sanitizers treat that failure as an error.
SAN_FILTER='-GpuPerf.*:GpuErrors.OutOfDeviceMemoryIsAValue'
SAN="compute-sanitizer --error-exitcode 1 --print-limit 20"

want tests && step gpu_tests gpu_tests.log "$TESTS" --gtest_filter="$FILTER"
# The four tools run side by side (separate processes on one GPU) to fit the lease.
san_start=$SECONDS
want san && for tool in memcheck racecheck initcheck synccheck; do
  (
    env LADDER_GPU_SWEEP=small timeout "${LADDER_SAN_TIMEOUT:-480}" $SAN --tool "$tool" "$TESTS" --gtest_filter="$SAN_FILTER" >"$LOG/san_$tool.log" 2>&1
    echo $? >"$LOG/san_$tool.rc"
  ) &
done
wait
want san && for tool in memcheck racecheck initcheck synccheck; do
  rc=$(cat "$LOG/san_$tool.rc" 2>/dev/null || echo 99)
  SUMMARY+=("$(printf '%-26s rc=%-3s %4ss  %s' "sanitizer_$tool" "$rc" "$((SECONDS - san_start))" "san_$tool.log")")
  if [ "$rc" -ne 0 ]; then FAILED=1; fi
done

if want cli && [ -x "$BIN/ladder" ]; then
  step demo_cuda demo.log "$BIN/ladder" demo --device cuda --tokens 16 --depth 2048
  step parity_cuda parity.log "$BIN/ladder" parity --device cuda
fi

if want perf; then
  step perf perf.log env LADDER_GPU_PERF=1 "$TESTS" --gtest_filter='GpuPerf.*'
fi

for tool in memcheck racecheck initcheck synccheck; do
  [ -f "$LOG/san_$tool.log" ] && { echo "===== compute-sanitizer --tool $tool"; cat "$LOG/san_$tool.log"; }
done >"$OUT/sanitizers.log"
for log in demo.log parity.log; do
  [ -f "$LOG/$log" ] && { echo "===== $log"; cat "$LOG/$log"; }
done >"$OUT/cli.log"
for log in build.log gpu_tests.log perf.log; do
  [ -f "$LOG/$log" ] && cp "$LOG/$log" "$OUT/$log"
done

{
  echo "== $(head -1 "$OUT/device.txt")"
  if [ -f "$LOG/gpu_tests.log" ]; then
    echo "== gpu tests"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error' "$LOG/gpu_tests.log" | tail -n 20
  fi
  for tool in memcheck racecheck initcheck synccheck; do
    [ -f "$LOG/san_$tool.log" ] &&
      echo "== $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/san_$tool.log" | tail -1) | $(grep -E '^\[  (PASSED|FAILED) ' "$LOG/san_$tool.log" | tr '\n' ' ')"
  done
  for log in demo.log parity.log; do
    [ -f "$LOG/$log" ] && { echo "== tail $log"; tail -n 14 "$LOG/$log"; }
  done
  [ -f "$LOG/perf.log" ] && { echo "== perf"; grep -vE '^\[' "$LOG/perf.log"; }
  echo "== summary"
  printf '%s\n' "${SUMMARY[@]}"
} | tee "$OUT/summary.txt"
exit "$FAILED"
