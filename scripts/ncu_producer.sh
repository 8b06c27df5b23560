#!/usr/bin/env bash
# ncu on ONE launch of the tensor-core producer, for each route given, on the GPU machine with
# the CLI carried (.carry/bench/bin/ladder, from `scripts/bench_device.sh prepare`):
#
#   scripts/ncu_producer.sh DEPTH ROUTE...     # e.g. scripts/ncu_producer.sh 131072 splitk/ring vec/ring
#
# Per route it writes $OUT/ncu_<route>_<depth>.txt: the details page (speed of light, memory
# workload, scheduler and warp-state statistics, occupancy) and, from the source page, the SASS
# instructions with the most stall samples. Only the first producer_tc launch is profiled (the
# ring fill and the other kernels run unprofiled: profiling every fill launch does not finish in
# a device call). Needs ncu on PATH or under /usr/local/cuda/bin.
#
#   LADDER_NCU_BATCH=16   profiles the batched producer instead: the first launch of the
#                         indirect kernel in the `layer-batch` rows (one layer over 16 sequences
#                         through the engine, each sequence at DEPTH); ROUTE (still a valid route:
#                         it goes to --routes) then only names the
#                         output file (the engine picks each layer class's route).
#   LADDER_NCU_SOURCE=1   also imports the CUDA sources into the report and writes its source
#                         page per CUDA line ($OUT/src_cuda_<route>_<depth>.csv.gz) and per SASS
#                         line with its CUDA line (src_cuda_sass_<route>_<depth>.csv.gz, what
#                         scripts/ncu_regions.py sums by region). The binary must be built with
#                         -lineinfo (CMAKE_CUDA_FLAGS=-lineinfo; the code is the same) and its
#                         sources must sit at the paths it was built from: the script links
#                         LADDER_BUILT_AT (the build machine's checkout, default /work/main) to
#                         this tree if that path is free.
#   LADDER_NCU_KERNEL=RE  profiles the first launch whose name matches RE instead of the producer
#                         (e.g. 'reduce_kernel<' for the direct reducer); the output files then
#                         carry the regex's letters in their names.
#   LADDER_NCU_SKIP=N     skips N matching launches first (steady state instead of the first).
#   LADDER_NCU_CACHE=none keeps the caches as the previous kernel left them (ncu's default, all,
#                         flushes them before each replay: a reducer then reads its partials from
#                         DRAM, not from L2 where its producer left them).
set -uo pipefail
cd "$(dirname "$0")/.."
depth=${1:?usage: scripts/ncu_producer.sh DEPTH ROUTE...}
shift
: "${OUT:=$PWD/ncu-out}"
mkdir -p "$OUT"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
BIN=${LADDER_BIN:-.carry/bench/bin/ladder}
IMPORT=no
if [ -n "${LADDER_NCU_SOURCE:-}" ]; then
  IMPORT=yes
  built_at=${LADDER_BUILT_AT:-/work/main}
  [ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"; }
fi
KSEL=(--launch-skip "${LADDER_NCU_SKIP:-0}" --launch-count 1 --cache-control "${LADDER_NCU_CACHE:-all}")
for route in "$@"; do
  tag=$(echo "$route" | tr '/' '_')_$depth
  [ -n "${LADDER_NCU_KERNEL:-}" ] && tag=${tag}_$(echo "$LADDER_NCU_KERNEL" | tr -cd 'A-Za-z0-9_')
  rep=/tmp/ncu_$tag
  if [ -n "${LADDER_NCU_BATCH:-}" ]; then
    tag=${tag}_batch${LADDER_NCU_BATCH}
    rep=/tmp/ncu_$tag
    "$NCU" --set full --import-source "$IMPORT" -k "regex:${LADDER_NCU_KERNEL:-producer_tc_kernel_indirect}" "${KSEL[@]}" -f -o "$rep" \
      "$BIN" bench --device cuda --depths "$depth" --routes "$route" --step-depths none --batch "$LADDER_NCU_BATCH" \
      --batch-max-depth 0 --no-engine --reps 3 --quiet >"/tmp/ncu_run_$tag.txt" 2>&1
  else
    "$NCU" --set full --import-source "$IMPORT" -k "regex:${LADDER_NCU_KERNEL:-producer_tc}" "${KSEL[@]}" -f -o "$rep" \
      "$BIN" bench --device cuda --depths "$depth" --routes "$route" --step-depths none --no-engine --reps 3 --quiet \
      >"/tmp/ncu_run_$tag.txt" 2>&1
  fi
  {
    echo "== $route at $depth"
    "$NCU" -i "$rep.ncu-rep" --page details 2>&1
    echo "== SASS lines with the most warp stall samples (source page)"
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass 2>&1 >"/tmp/src_$tag.csv"
    python3 - "/tmp/src_$tag.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
# The page starts with a "Kernel Name" line; the column header is the row that starts "Address".
start = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
if start is None:
    print("no source page"); sys.exit()
hdr = rows[start]
rows = rows[start:]
def col(name):
    for i, h in enumerate(hdr):
        if h.strip().lower() == name.lower():
            return i
    return None
src = col("Source")
samp = col("Warp Stall Sampling (All Samples)")
if src is None or samp is None:
    print("columns:", hdr[:40]); print("\n".join(",".join(r) for r in rows[:20])); sys.exit()
def num(s):
    try: return float(s.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[1:] if len(r) > max(src, samp)]
total = sum(num(r[samp]) for r in body) or 1.0
# The stall reasons of a line (issued and not issued), largest first.
reasons = [(i, h) for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
def why(r):
    top = sorted(((num(r[i]), h[len("stall_"):]) for i, h in reasons), reverse=True)[:3]
    return " ".join(f"{n}:{v:.0f}" for v, n in top if v > 0)
print(f"total samples {total:.0f}")
print("by reason:", ", ".join(f"{h[len('stall_'):]} {100*sum(num(r[i]) for r in body)/total:.1f}%"
      for i, h in sorted(reasons, key=lambda ih: -sum(num(r[ih[0]]) for r in body))[:10]))
for k, r in sorted(enumerate(body), key=lambda kr: -num(kr[1][samp]))[:45]:
    print(f"{100*num(r[samp])/total:5.1f}%  #{k:<5d} {r[src].strip()[:70]:70s} {why(r)}")
# Samples per opcode class.
agg = {}
for r in body:
    op = r[src].strip().split()
    op = [t for t in op if not t.startswith("@")]
    key = op[0].split(".")[0] if op else "?"
    agg[key] = agg.get(key, 0.0) + num(r[samp])
print("by opcode:", ", ".join(f"{k} {100*v/total:.1f}%" for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:15]))
PY
    tail -3 "/tmp/ncu_run_$tag.txt"
  } >"$OUT/ncu_$tag.txt" 2>&1
  gzip -c "/tmp/src_$tag.csv" >"$OUT/src_$tag.csv.gz"
  if [ "$IMPORT" = yes ]; then
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source cuda 2>&1 | gzip -c >"$OUT/src_cuda_$tag.csv.gz"
    "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source cuda,sass 2>&1 | gzip -c >"$OUT/src_cuda_sass_$tag.csv.gz"
  fi
done
