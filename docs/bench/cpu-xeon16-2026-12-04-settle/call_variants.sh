set -u
mkdir -p $OUT/v
LADDER_AB_DEVICE=cpu OUT=$OUT/v timeout 420 scripts/bench_variants.sh 6 .carry/cpu/A.xz .carry/cpu/99e909c.xz .carry/cpu/3bba89a.xz .carry/cpu/B2.xz -- --threads 16 --reps 30 --depths 8192 --step-depths 32768 --routes splitk/ring --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >$OUT/rc.txt
[ -s $OUT/v/variants_summary.txt ] || scripts/bench_variants.sh --summary $OUT/v/variants.txt >$OUT/v/summary.txt 2>&1
