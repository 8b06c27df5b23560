#!/usr/bin/env python3
"""Per-kernel GPU time from an ncu CSV (`ncu --csv --metrics gpu__time_duration.sum ...`).

Groups the profiled launches by (kernel name, grid) and prints count, median and total
microseconds per group, largest total first: where one engine call's GPU time goes, kernel by
kernel. Usage: kernel_times.py NCU.csv [--skip-name REGEX]
"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--skip-name", default="", help="regex of kernel names to leave out")
    a = ap.parse_args()
    groups = defaultdict(list)
    with open(a.csv, newline="") as f:
        # ncu prints its own progress lines before the CSV header; start at the header.
        lines = [ln for ln in f if ln.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = re.sub(r"\(.*", "", row["Kernel Name"]).strip()
        if a.skip_name and re.search(a.skip_name, name):
            continue
        unit = row.get("Metric Unit", "nsecond")
        value = float(row["Metric Value"].replace(",", ""))
        us = value / 1000.0 if unit.startswith("n") else value if unit.startswith("u") else value * 1000.0
        groups[(name, row.get("Grid Size", "?"), row.get("Block Size", "?"))].append(us)
    if not groups:
        sys.exit("no gpu__time_duration.sum rows in " + a.csv)
    print(f"{'kernel':60} {'grid':>16} {'block':>12} {'n':>5} {'median us':>10} {'total us':>10}")
    for (name, grid, block), v in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        print(f"{name[:60]:60} {grid:>16} {block:>12} {len(v):5d} {statistics.median(v):10.2f} {sum(v):10.1f}")


if __name__ == "__main__":
    main()
