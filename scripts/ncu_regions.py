#!/usr/bin/env python3
"""Stall samples of one ncu source page (per SASS line with its CUDA line: the
src_cuda_sass_*.csv.gz that `LADDER_NCU_SOURCE=1 scripts/ncu_producer.sh` writes) summed by the
function whose lines they fall on, then by region of the tensor-core producer.

    scripts/ncu_regions.py COMMIT PAGE.csv.gz [--lines N]

COMMIT names the tree the profiled binary was built from: a CUDA line is given to the function
that starts last before it in that commit's file (a regex over function heads; inlined helpers'
lines count under the helper's own name)."""
import argparse, collections, csv, gzip, re, subprocess

# Function (or header file, for lines outside src/cuda) -> region.
REGIONS = {
    "q load and split": ["tc_load_q", "in_range4"],
    "copy issue": ["tc_issue_block", "tc_prologue", "plane.hpp", "fused.cu", "splitk.cu", "vec.cu",
                   "interleaved.cu", "kernel_params.hpp"],
    "slot end": ["tc_merge_pairs", "tc_write_partial", "tc_stash_pair_state"],
    "fold": ["tc_fold_block", "tc_scores", "tc_pv", "softmax.hpp", "ldmatrix_x4", "ldmatrix_x4_trans",
             "sm_30_intrinsics.hpp", "split_pair", "cuda_fp16.hpp", "cuda_bf16.hpp", "mma16816", "tc_weight",
             "nonfinite.hpp"],
}
HEAD = re.compile(r"^(?:template <[^>]*>\s*)?(?:__device__|__global__|inline|LADDER_HD|static).*?\b(\w+)\(")


def source(commit, name, cache={}):
    if name not in cache:
        r = subprocess.run(["git", "show", f"{commit}:src/cuda/{name}"], capture_output=True, text=True)
        cache[name] = r.stdout.split("\n") if r.returncode == 0 else None
    return cache[name]


def function_of(commit, name, line):
    lines = source(commit, name)
    if lines is None:
        return name  # a header outside src/cuda: the file stands for the function
    found = name
    for i, text in enumerate(lines[:line], 1):
        m = HEAD.match(text)
        if m and not text.lstrip().startswith("//"):
            found = m.group(1)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("commit")
    ap.add_argument("page")
    ap.add_argument("--lines", type=int, default=20, help="the N CUDA lines with the most samples")
    a = ap.parse_args()
    per_line = collections.Counter()
    name = None
    header = False
    for row in csv.reader(gzip.open(a.page, "rt", errors="replace")):
        if not row:
            continue
        if row[0] == "File Path":
            name = row[1].split("/")[-1]
        elif row[0] == "Line No":
            header = True
        elif header and row[0] and name:
            # A CUDA line's row (its SASS rows below it have an empty line number): column 4 is
            # "Warp Stall Sampling (All Samples)".
            try:
                per_line[(name, int(row[0]))] += float(row[4].replace(",", ""))
            except ValueError:
                pass
    total = sum(per_line.values()) or 1.0
    per_function = collections.Counter()
    for (f, line), n in per_line.items():
        per_function[function_of(a.commit, f, line)] += n
    per_region = collections.Counter()
    for fn, n in per_function.items():
        region = next((r for r, names in REGIONS.items() if fn in names), "the rest")
        per_region[region] += n
    print(f"total samples {total:.0f}")
    print("by region:", ", ".join(f"{r} {100 * n / total:.1f}%" for r, n in per_region.most_common()))
    print("by function:")
    for fn, n in per_function.most_common(25):
        print(f"  {100 * n / total:5.1f}%  {fn}")
    print("by CUDA line:")
    for (f, line), n in per_line.most_common(a.lines):
        lines = source(a.commit, f)
        text = lines[line - 1].strip()[:90] if lines and line <= len(lines) else ""
        print(f"  {100 * n / total:5.1f}%  {f}:{line}  {text}")


if __name__ == "__main__":
    main()
