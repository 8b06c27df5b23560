#!/bin/bash
# The device host's CPU, one call (issue 11; docs/perf.md 2026-12-07 "the Xeon's 2- and 4-worker
# rows"): (1) the CPU topology the VM shows; (2) two workers pinned to chosen CPU pairs (taskset):
# does a pair of these vCPUs share a core (the FMA ceiling of the pair and an 8,192-token layer);
# (3) the pool's profile at 2, 4 and 16 workers; (4) main's Intel path against the AMD path
# (LADDER_CPU_WIDEN=kernels) in the same rotated rounds, at 16 and 4 workers.
# ROUNDS=0 leaves out part (4). Carry .carry/xdiag (ladder74: main's CPU Release build; ladder74k: it with LADDER_CPU_WIDEN=kernels).
# Everything lands in $OUT/xdiag.tgz (the device tool returns few files).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rounds=$root/docs/bench/cpu-zen5-2026-12-06-late/rounds.sh
bins=$root/.carry/xdiag
o=/tmp/xdiag; rm -rf "$o"; mkdir -p "$o"
{ lscpu; lscpu -e; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list; } >"$o/topology.txt" 2>&1
for pair in 0,1 0,2 0,8 0,9 3,11; do
  taskset -c "$pair" "$bins/ladder74" bench --device cpu --depths 8192 --routes vec/growing --step-depths none \
    --threads 2 --reps 10 --quiet >"$o/pair-$pair.txt" 2>&1
  echo "pair $pair: $(grep -E '^FMA|^layer' "$o/pair-$pair.txt" | tr '\n' ' ')"
done
for t in 2 4 16; do
  timeout 60 "$bins/ladder74" bench --device cpu --depths 8192 --routes vec/growing,vec/ring --step-depths 8192 --no-fallback-step \
    --threads $t --reps 10 --pool-profile --quiet >"$o/pool-$t.txt" 2>&1
  grep -E '^FMA|^layer|^step|^pool' "$o/pool-$t.txt"
done
if [[ ${ROUNDS:-3} -gt 0 ]]; then
common=(DEPTHS=2048,8192,32768 ROUTES=vec/ring,vec/growing STEP_DEPTHS=2048,8192 REPS=20)
env "${common[@]}" THREADS=16 BIN_DIR="$bins" OUT_DIR="$o/r16" timeout "${R16_LIMIT:-120}" bash "$rounds" r16 "${ROUNDS:-3}" 74 74k 2>/dev/null
env "${common[@]}" THREADS=4 BIN_DIR="$bins" OUT_DIR="$o/r4" timeout "${R4_LIMIT:-120}" bash "$rounds" r4 "${ROUNDS4:-2}" 74 74k 2>/dev/null
fi
tar czf "$OUT/xdiag.tgz" -C "$o" .
