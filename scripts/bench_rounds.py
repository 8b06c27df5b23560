"""The rounds that scripts/bench_ab.sh and scripts/bench_variants.sh write (each run's `ladder
bench` table under a header "== NAME round R ..."), read once, and the two tables they print.

    python3 scripts/bench_rounds.py ab FILE        A against B: medians, ratio, spreads, apart
    python3 scripts/bench_rounds.py variants FILE  every variant's median, ratio to the first
"""
import collections
import re
import statistics
import sys

ROW = re.compile(r"^(layer-batch|layer|step|engine)\s+(.+?)\s{2,}(\d+)\s+([\d.]+)\s")


def read_rounds(path):
    """(names in order of first appearance, {(kind, case, depth): {name: [median_us per round]}}).
    Rows under any other header (a failed run's, the medians table a script appends to its own
    file) are not counted."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    order = []
    name = None
    for line in open(path):
        if line.startswith("== "):
            m = re.match(r"== (\S+) round", line)
            name = m.group(1) if m else None
            if name and name not in order:
                order.append(name)
            continue
        m = ROW.match(line)
        if name and m:
            runs[(m.group(1), m.group(2), m.group(3))][name].append(float(m.group(4)))
    return order, runs


def median(values):
    return statistics.median(values) if values else float("nan")


def print_ab(runs):
    def spread(values):  # "lo-hi" over the rounds, or "-" for a side with no rows
        return f"{min(values):.2f}-{max(values):.2f}" if values else "-"

    def apart(a, b):  # whether every round of one side is below every round of the other
        if not a or not b:
            return "-"
        return "yes" if max(a) < min(b) or max(b) < min(a) else "no"

    print(f"{'kind':<12} {'case':<44} {'depth':>7} {'A us':>10} {'B us':>10} {'B/A':>6} "
          f"{'A lo-hi':>17} {'B lo-hi':>17} {'apart':>5}")
    for key, sides in runs.items():
        a_runs, b_runs = sides.get("A", []), sides.get("B", [])
        if not a_runs and not b_runs:
            continue  # a row of another build only
        a, b = median(a_runs), median(b_runs)
        print(f"{key[0]:<12} {key[1][:44]:<44} {key[2]:>7} {a:>10.2f} {b:>10.2f} {b / a:>6.3f} "
              f"{spread(a_runs):>17} {spread(b_runs):>17} {apart(a_runs, b_runs):>5}")


def print_variants(order, runs):
    print(f"{'kind':<12} {'case':<40} {'depth':>7}" + "".join(f" {n[:14]:>14}" for n in order)
          + "   (median us; / first)")
    for key, by in runs.items():
        base = median(by.get(order[0], []))
        cells = []
        for n in order:
            if not by.get(n):
                cells.append(f" {'-':>14}")
                continue
            v = median(by[n])
            cells.append(f" {v:>8.2f}" + (f" {v / base:>5.2f}" if n != order[0] else " " * 6))
        print(f"{key[0]:<12} {key[1][:40]:<40} {key[2]:>7}" + "".join(cells))


def main(argv):
    if len(argv) != 3 or argv[1] not in ("ab", "variants"):
        sys.exit(__doc__)
    order, runs = read_rounds(argv[2])
    if argv[1] == "ab":
        print_ab(runs)
    elif not order:
        sys.exit("no variant rounds in " + argv[2])
    else:
        print_variants(order, runs)


if __name__ == "__main__":
    main(sys.argv)
