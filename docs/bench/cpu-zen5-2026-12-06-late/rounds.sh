#!/bin/bash
# Interleaved rounds of `ladder bench --device cpu` over several builds (changes 64/65, issue 11):
#   rounds.sh TAG ROUNDS NAME...   runs $BIN_DIR/ladderNAME (default /tmp/cb) ROUNDS times each, the
#   order rotated every round; JSON under $OUT_DIR (default /tmp/cb); prints each row's median and
#   minimum over the rounds per build. Env: THREADS (1), DEPTHS (2048), ROUTES (vec/ring),
#   STEP_DEPTHS (8192), REPS (20).
set -euo pipefail
tag=$1; rounds=$2; shift 2
bins=("$@")
bin_dir=${BIN_DIR:-/tmp/cb}; out=${OUT_DIR:-/tmp/cb}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  n=${#bins[@]}
  for i in $(seq 0 $((n - 1))); do
    b=${bins[$(((i + r) % n))]}
    "$bin_dir/ladder$b" bench --device cpu --depths "${DEPTHS:-2048}" --routes "${ROUTES:-vec/ring}" \
      --step-depths "${STEP_DEPTHS:-8192}" --no-fallback-step --threads "${THREADS:-1}" --reps "${REPS:-20}" \
      --quiet --json --output "$out/$tag-$b-$r.json" >/dev/null 2>&1
    echo "round $r: $b done" >&2
  done
done
python3 - "$out" "$tag" "$rounds" "${bins[@]}" <<'P'
import json, statistics, sys
out, tag, rounds, bins = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
for b in bins:
    rows = {}
    for r in range(1, rounds + 1):
        d = json.load(open(f'{out}/{tag}-{b}-{r}.json'))
        for x in (d['rows'] if isinstance(d, dict) else d):
            rows.setdefault(f"{x['name']}@{x['depth']}", []).append(x['median_us'])
    print(f"{b:>6} " + "  ".join(f"{k}: med {statistics.median(v):.0f} min {min(v):.0f}" for k, v in rows.items()))
P
