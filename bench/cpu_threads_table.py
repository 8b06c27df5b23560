#!/usr/bin/env python3
"""One table from several `ladder bench --device cpu --output` files (issue 11).

Each input is one binary at one thread count (bench/cpu_roof.sh names them
bench-<label>-t<threads>.json). The table puts, per binary, case and depth, the median and the
fraction of that run's own roofline at every thread count side by side, the speedup over the
1-thread row, and the FMA ceiling of each thread count (its own scaling is the yardstick for the
layer's). A row whose median lies within TICK_SLACK_US of a whole number of 4 ms scheduler ticks
is marked `tick?`: that is what a worker lost to a wake-up stall looked like (docs/perf.md).

    python3 bench/cpu_threads_table.py OUT_DIR   # writes OUT_DIR/threads.txt and threads.json
"""
import glob
import json
import os
import re
import sys

TICK_US = 4000.0     # one scheduler tick at HZ = 250
TICK_SLACK_US = 60.0  # a 3,999 us row was the symptom; 1.5 % of a tick either side


def near_tick(us):
    k = round(us / TICK_US)
    return k >= 1 and abs(us - k * TICK_US) <= TICK_SLACK_US


def main():
    out = sys.argv[1]
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "bench-*-t*.json"))):
        m = re.match(r"bench-(.+)-t(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs[(m.group(1), int(m.group(2)))] = json.load(f)
    if not runs:
        sys.exit(f"no bench-*-t*.json under {out}")
    labels = sorted({k[0] for k in runs})
    threads = sorted({k[1] for k in runs})
    lines = []
    table = []
    for label in labels:
        lines.append(f"== {label}")
        for t in threads:
            r = runs.get((label, t))
            if r:
                c = r["ceiling"]
                lines.append(f"  {t:>2} threads: FMA {c['fma_g_per_s']:.1f} G/s, read {c['read_gb_per_s']:.1f} GB/s"
                             f" ({r['device_name']}, {r['date']})")
        keys = []
        for t in threads:
            for row in runs.get((label, t), {}).get("rows", []):
                key = (row["kind"], row["name"], row["depth"])
                if key not in keys:
                    keys.append(key)
        head = f"  {'kind':<6}{'case':<14}{'depth':>7}"
        for t in threads:
            head += f"  {'t=' + str(t) + ' us (roof)':>22}"
        head += "  speedup over t=1"
        lines.append(head)
        for key in keys:
            line = f"  {key[0]:<6}{key[1]:<14}{key[2]:>7}"
            base = None
            speed = []
            for t in threads:
                row = next((x for x in runs.get((label, t), {}).get("rows", [])
                            if (x["kind"], x["name"], x["depth"]) == key), None)
                if row is None:
                    line += f"  {'-':>22}"
                    continue
                us = row["median_us"]
                frac = row.get("fraction_of_roofline")
                mark = " tick?" if near_tick(us) else ""
                cell = f"{us:.1f} ({frac:.2f}){mark}" if frac is not None else f"{us:.1f}{mark}"
                line += f"  {cell:>22}"
                if t == 1:
                    base = us
                if base:
                    speed.append(f"{t}:{base / us:.2f}")
                table.append({"binary": label, "threads": t, "kind": key[0], "case": key[1], "depth": key[2],
                              "median_us": us, "min_us": row["min_us"], "max_us": row["max_us"],
                              "fraction_of_roofline": frac, "roofline_us": row.get("roofline_us"),
                              "near_tick": near_tick(us)})
            lines.append(line + "  " + " ".join(speed))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "threads.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "threads.json"), "w") as f:
        json.dump({"rows": table, "ceilings": {f"{k[0]}-t{k[1]}": v["ceiling"] for k, v in runs.items()}}, f, indent=1)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
