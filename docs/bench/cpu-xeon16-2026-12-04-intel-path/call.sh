set -u
mkdir -p $OUT/v
LADDER_AB_DEVICE=cpu OUT=$OUT/v timeout 200 scripts/bench_variants.sh 6 .carry/cpu/A.xz .carry/cpu/B2.xz .carry/cpu/C.xz -- --threads 16 --reps 30 --depths 8192,32768 --step-depths 32768 --routes splitk/ring,vec/growing --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >$OUT/rc.txt
