#!/bin/bash
# The verification still owed on main after 2026-12-07 (issues 8, 9 and 11), as two device calls
# of at most 600 s each. Build here first:
#   scripts/pack_carry.sh build-cuda .carry/main ladder=ladder ladder_gpu_tests=ladder_gpu_tests
#   LADDER_CLI=build-cuda/ladder scripts/bench_device.sh prepare
# and keep .carry/xdiag (docs/bench/cpu-xeon16-2026-12-07/diag.sh: ladder74 and its wrapper).
#
#   call.sh suite   (carry .carry/main): the GPU suite and the full default sanitizer sweep (all
#                   four tools over every test but the perf, refused-allocation, host-only and
#                   death tests; ~230 s on an H200 on 2026-12-03), `ladder demo` / `ladder parity`
#                   on the GPU; then, in what time is left, the Xeon host's CPU diagnostic
#                   without its rounds.
#   call.sh san TOOLS  (carry .carry/main): the default sanitizer sweep of the comma-separated
#                   compute-sanitizer TOOLS alone (no suite), under SAN_LIMIT (default 560 s); the
#                   default sweep of all four did not fit one call beside the suite on 2026-12-07
#                   (memcheck alone ran 61 tests in the ~45 s left after the suite).
#   call.sh owed    (carry .carry/main): what two `san` calls on the H100 left unrun (2026-12-07
#                   19:54Z and 23:51Z: both reached the same 39 racecheck tests in
#                   330-400 s), side by side under SAN_LIMIT (default 560 s): memcheck over its
#                   two tests (2 processes) and racecheck over the other 54 (14 processes).
#   call.sh bench   (carry .carry/bench, or .carry/benchp: the prefix and ladder.xz, unpacked into
#                   .carry/bench here): `ladder bench` with batch 1, 4, 16, 64 (single layers,
#                   same-depth and mixed-length engine rows up to 8,192) and bench/peers.py
#                   (cuDNN SDPA and FlashInfer beside it), the Python module and its GPU tests.
# Everything under $OUT comes back as one archive (the device tool returns at most 8 files).
set -u
cd "$(dirname "$0")/../../.."
R=${OUT:?run through the device tool}
w=/tmp/verify
mkdir -p "$w"
# main's carried binaries into $w/bin.
unpack_main() {
  mkdir -p "$w/bin"
  for f in .carry/main/*.xz; do xz -dc "$f" >"$w/bin/$(basename "$f" .xz)"; done
  chmod +x "$w/bin"/*
}
case "${1:-}" in
  suite)
    unpack_main
    OUT=$w/dev LADDER_BIN_DIR=$w/bin LADDER_STEPS=tests,san,cli timeout "${SUITE_LIMIT:-470}" \
      bash scripts/device_run.sh >"$w/dev-run.txt" 2>&1
    echo "device_run rc=$?" >>"$w/dev-run.txt"
    # A suite cut by its limit leaves sanitizer processes running (H100, 2026-12-07: the diagnostic
    # after it then read 0.25 of the roofline on 16 threads); the CPU rows need an idle host.
    # The bracketed first letter keeps the pattern from matching a shell whose own command line
    # holds it (an inline device command that did this killed itself, 2026-12-07 13:36Z).
    pkill -f '[c]ompute-sanitizer'; pkill -f '[l]adder_gpu_tests'; sleep 2
    OUT=$w ROUNDS=0 timeout "${DIAG_LIMIT:-90}" bash docs/bench/cpu-xeon16-2026-12-07/diag.sh >"$w/diag.txt" 2>&1
    tar czf "$R/suite.tgz" --exclude=bin -C /tmp verify xdiag 2>/dev/null || tar czf "$R/suite.tgz" --exclude=bin -C /tmp verify
    ;;
  san)
    unpack_main
    OUT=$w/san LADDER_BIN_DIR=$w/bin LADDER_STEPS=san LADDER_SAN_TOOLS="${2:?call.sh san TOOLS}" \
      LADDER_SAN_JOBS=16 timeout "${SAN_LIMIT:-560}" bash scripts/device_run.sh >"$w/san-run.txt" 2>&1
    echo "device_run rc=$?" >>"$w/san-run.txt"
    pkill -f '[c]ompute-sanitizer'; pkill -f '[l]adder_gpu_tests'
    tar czf "$R/san.tgz" --exclude=bin -C /tmp verify
    ;;
  owed)
    unpack_main
    mem=GpuFused.BatchOneEngineReducerWaitsForItsProducers:GpuSlotWalk.FoldedGroupsGiveTheReducerBits
    race=Cases/*:Gpu/*:GpuBf16/*:GpuSlotWalk.*:GpuSmCount.*:GpuEngine.ReplayedTimedCallsGiveTheSameBits
    race+=:GpuFused.BatchOneEngineReducerWaitsForItsProducers
    limit=${SAN_LIMIT:-560}
    OUT=$w/mem LADDER_BIN_DIR=$w/bin LADDER_STEPS=san LADDER_SAN_TOOLS=memcheck LADDER_SAN_TESTS=$mem \
      LADDER_SAN_JOBS=2 LADDER_SAN_TIMEOUT=$((limit - 10)) timeout "$limit" bash scripts/device_run.sh >"$w/mem-run.txt" 2>&1 &
    OUT=$w/race LADDER_BIN_DIR=$w/bin LADDER_STEPS=san LADDER_SAN_TOOLS=racecheck LADDER_SAN_TESTS=$race \
      LADDER_SAN_JOBS=14 LADDER_SAN_TIMEOUT=$((limit - 10)) timeout "$limit" bash scripts/device_run.sh >"$w/race-run.txt" 2>&1 &
    wait
    pkill -f '[c]ompute-sanitizer'; pkill -f '[l]adder_gpu_tests'
    tar czf "$R/owed.tgz" --exclude=bin -C /tmp verify
    ;;
  bench)
    if [ ! -x .carry/bench/bin/ladder ] && [ -f .carry/benchp/ladder.xz ]; then
      mkdir -p .carry/bench/bin && cp -r .carry/benchp/prefix .carry/bench/
      xz -dc .carry/benchp/ladder.xz >.carry/bench/bin/ladder && chmod +x .carry/bench/bin/ladder
    fi
    OUT=$w/bench LADDER_BENCH_ARGS="--batch 1,4,16,64 --batch-max-depth 8192 --step-depths 2048,8192,32768" \
      BENCH_TIMEOUT=${BENCH_LIMIT:-300} PEERS_TIMEOUT=${PEERS_LIMIT:-200} bash scripts/bench_device.sh run \
      >"$w/bench-run.txt" 2>&1
    tar czf "$R/bench.tgz" -C /tmp verify
    ;;
  *) sed -n 2,25p "$0" >&2; exit 2 ;;
esac
