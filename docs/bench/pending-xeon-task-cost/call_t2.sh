# The kept form of probe T (kFastSplitTaper: tapered splits only where the last keeps
# kFastMinChunksPerSplit chunks, from 16,384 tokens) against main, on the 16-CPU Xeon: 16 threads,
# five alternated rounds, the rows it changes (16,384 / 32,768 / 131,072, the step at 32,768) and
# one it must not (8,192). Carry [".carry/xeon-t2"] with main.xz (the tree before) and t2.xz.
set -u
for v in main t2; do xz -dc .carry/xeon-t2/$v.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
OUT=$OUT/t16 LADDER_AB_DEVICE=cpu timeout 280 scripts/bench_variants.sh 5 /tmp/ladder_main /tmp/ladder_t2 -- \
  --threads 16 --depths 8192,16384,32768,131072 --routes vec/growing,splitk/ring --step-depths 32768 \
  --no-fallback-step --reps 20 --pool-profile >/dev/null 2>&1
echo "t16 rc=$?" >>"$OUT/rc.txt"
