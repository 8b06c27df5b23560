# One device call's CPU work (issue 11): on the H200 host's 16-CPU Xeon (a KVM guest), where a
# fast-producer task of four chunks costs ~17 us more than its chunks at one thread (2026-12-05
# pool-profile run: 8,192 is 1.6x the per-token time of 32,768; the 2-vCPU EPYC ~2 us), find the
# per-task cost and test finer tasks. Variants: main (this tree's CPU-only build) and E (splits
# of at least 2 chunks, at most 64 per KV head: twice the tasks at 8,192) and T (the same
# splits, tapered: the first about three times the last, so a job's last tasks are its shortest;
# t.patch in docs/bench/cpu-build2-2026-12-05-task-split). Build here:
#   cmake --build build-cpu --target ladder_cli && xz -c build-cpu/ladder > .carry/xeon-e/main.xz
#   (E: the same with kFastMinChunksPerSplit = 2, kFastMaxSplits = 2 * kMaxWorkgroups) > e.xz
# Run with carry [".carry/xeon-e"]: `bash docs/bench/pending-xeon-task-cost/call.sh` (~8 min).
set -u
for v in main e t; do xz -dc .carry/xeon-e/$v.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
{ cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; grep -i huge /proc/meminfo;
  command -v perf || echo "no perf"; nproc; } >"$OUT/host.txt" 2>&1
# One thread, a depth sweep: per-task against per-token cost, main and E alternated.
OUT=$OUT/t1 LADDER_AB_DEVICE=cpu timeout 200 scripts/bench_variants.sh 2 /tmp/ladder_main /tmp/ladder_e -- \
  --threads 1 --depths 2048,4096,8192,16384,32768 --routes vec/growing,splitk/ring --step-depths none \
  --no-fallback-step --reps 10 >/dev/null 2>&1
echo "t1 rc=$?" >>"$OUT/rc.txt"
# 16 threads: single layers with the pool profile, and the step at 2,048 and 8,192.
OUT=$OUT/t16 LADDER_AB_DEVICE=cpu timeout 330 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_e /tmp/ladder_t -- \
  --threads 16 --depths 2048,8192,32768 --routes vec/growing,splitk/ring --step-depths 2048,8192 \
  --no-fallback-step --reps 20 --pool-profile >/dev/null 2>&1
echo "t16 rc=$?" >>"$OUT/rc.txt"
