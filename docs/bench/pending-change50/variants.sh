# Timing only, three interleaved rounds of the named builds (each .carry/NAME/ladder.xz; carry
# them all): batch-16 layers at 2,048 / 8,192 / 32,768 and the batch-1 splitk/ring layer, results
# in $OUT/variants. ~15 s per build on an H100. The calls of change 50's work:
#   probe 50:            bash docs/bench/pending-change50/variants.sh main p50
#   changes 50 and 50i:  bash docs/bench/pending-change50/variants.sh main c50 c50i
#     (c50 = consecutive fold groups, whole workgroups; c50i = interleaved groups: slots j,
#     j + groups, ...; both with the reducer's exit past the last group)
#   change 51:           change51.sh; change 50b: change50b.sh (which call this first)
set -u
[[ $# -ge 2 ]] || { sed -n '1,9p' "$0" >&2; exit 2; }
mkdir -p $OUT/variants
bins=()
for v in "$@"; do
  xz -dc .carry/$v/ladder.xz >/tmp/ladder_$v && chmod +x /tmp/ladder_$v && bins+=(/tmp/ladder_$v)
done
OUT=$OUT/variants timeout "${BENCH_LIMIT:-200}" scripts/bench_variants.sh "${ROUNDS:-3}" "${bins[@]}" -- \
  --depths 2048,8192,32768 --routes splitk/ring --batch 16 --batch-max-depth 0 --step-depths none \
  --no-fallback-step >/dev/null 2>&1
echo "variants rc=$?" >>$OUT/variants/rc.txt
