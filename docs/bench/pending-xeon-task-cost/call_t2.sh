# The kept form of probe T (kFastSplitTaper: tapered splits only where the last keeps
# kFastMinChunksPerSplit chunks, from 16,384 tokens) against main, on the 16-CPU Xeon: 16 threads,
# three alternated rounds, the lengths T's run did not cover (16,384 and 131,072; at 32,768 the
# kept form is T, at 2,048 and 8,192 it is main). Carry [".carry/xeon-t2"] with main.xz (the tree
# before) and t2.xz. ~2 min.
set -u
for v in main t2; do xz -dc .carry/xeon-t2/$v.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v; done
OUT=$OUT/t16 LADDER_AB_DEVICE=cpu timeout 200 scripts/bench_variants.sh 3 /tmp/ladder_main /tmp/ladder_t2 -- \
  --threads 16 --depths 16384,131072 --routes vec/growing,splitk/ring --step-depths none \
  --no-fallback-step --reps 20 --pool-profile >/dev/null 2>&1
echo "t16 rc=$?" >>"$OUT/rc.txt"
