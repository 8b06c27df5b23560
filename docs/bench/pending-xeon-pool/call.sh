# The next device call's CPU half (issue 11): on the H200 host's 16-CPU Xeon, the worker pool's
# own profile (`ladder bench --pool-profile`, docs/threads.md) at 16, 8, 4, 2 and 1 threads, so
# the ring class's 0.48-0.50 of the roofline at 8,192 (docs/perf.md) is split into the tasks'
# own time and what the pool loses around them (workers joining late, too few tasks for the
# threads, reduces waiting). ~3 min. Build here first, from the tree that holds this script:
#   cmake --build build-cpu --target ladder_cli && xz -c build-cpu/ladder > .carry/xeon-pool/ladder.xz
# then: run with carry [".carry/xeon-pool"] and command `bash docs/bench/pending-xeon-pool/call.sh`;
# results under $OUT (bench-T.txt / .json per thread count, rc.txt, lscpu.txt).
set -u
xz -dc .carry/xeon-pool/ladder.xz >/tmp/ladder && chmod +x /tmp/ladder
lscpu >"$OUT/lscpu.txt" 2>&1
for t in 16 8 4 2 1 16; do
  tag=$t; [[ -e $OUT/bench-$t.json ]] && tag=$t-again
  timeout 110 /tmp/ladder bench --device cpu --threads "$t" --depths 2048,8192,32768 \
    --routes vec/growing,splitk/ring --step-depths 8192 --no-fallback-step --reps 20 --pool-profile \
    --output "$OUT/bench-$tag.json" >"$OUT/bench-$tag.txt" 2>"$OUT/bench-$tag.err"
  echo "threads $t rc=$?" >>"$OUT/rc.txt"
done
