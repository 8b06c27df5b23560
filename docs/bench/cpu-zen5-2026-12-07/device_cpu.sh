#!/bin/bash
# The CPU half of a device call (issue 11; docs/perf.md 2026-12-07): on the device host's cores,
#   1. experiment 64 and changes 65-74 in rotated rounds (rounds.sh, 16 threads): ladderA (main
#      before changes 65/66), ladder66, ladder66x8 (splits of 8 chunks), ladder74 (main after 74);
#   2. ladder74 with the other vendor's path (LADDER_CPU_WIDEN: kernels on Intel, separate on AMD);
#   3. bench/cpu_peers.sh run with main's build (1, 2, 4, 8, 16 threads, then the peers).
# Carry .carry/cpu-rounds (the four ladderNAME binaries) and .carry/cpu-peers (bench/cpu_peers.sh
# prepare). Results under $OUT/x16, $OUT/x16v, $OUT/peers; each part under its own time limit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rounds=$root/docs/bench/cpu-zen5-2026-12-06-late/rounds.sh
bins=$root/.carry/cpu-rounds
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|L2|L3' >"$OUT/cpu.txt" 2>&1
common=(THREADS=16 DEPTHS=2048,8192,32768 ROUTES=vec/ring,vec/growing STEP_DEPTHS=2048,8192 REPS=20)
env "${common[@]}" BIN_DIR="$bins" OUT_DIR="$OUT/x16" timeout "${ROUNDS_LIMIT:-150}" \
  bash "$rounds" x16 "${ROUNDS:-3}" A 66 66x8 74 >"$OUT/x16.txt" 2>&1
echo "x16 rc=$?" >>"$OUT/cpu.txt"
other=kernels
grep -q AuthenticAMD /proc/cpuinfo && other=separate
env "${common[@]}" LADDER_CPU_WIDEN=$other BIN_DIR="$bins" OUT_DIR="$OUT/x16v" timeout 60 \
  bash "$rounds" "x16-$other" 2 74 >"$OUT/x16v.txt" 2>&1
echo "x16v ($other) rc=$?" >>"$OUT/cpu.txt"
OUT=$OUT/peers THREAD_LIST="1 2 4 8 16" REPS=10 timeout "${PEERS_LIMIT:-260}" \
  bash "$root/.carry/cpu-peers/cpu_peers.sh" run "$root/.carry/cpu-peers"
echo "peers rc=$?" >>"$OUT/cpu.txt"
