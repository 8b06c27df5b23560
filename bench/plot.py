#!/usr/bin/env python3
"""Microseconds per layer against depth: one line per ladder route (`ladder bench --json`) and
one per peer (bench/peers.py's peers.json), with each line's fraction of the bandwidth ceiling
in a second panel.

    python3 bench/plot.py --bench bench.json --peers peers.json --out us_per_layer.png

Either input may be left out (a CPU bench has no peers file). Peers are drawn at batch 1, the
shape of ladder's single-layer rows, unless --batches names others (a batch-16 call covers 16
sequences' layers); ladder's own one-layer-over-a-batch rows (`layer-batch`) are drawn for the
batches named above 1. bench/peers.py draws its peers.png through draw() here. Bad input (a
missing or malformed file, a file of the other kind, a row without a positive depth or time)
is refused with a message naming the file and the row, exit code 2, and no image is written.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import json
import math
import sys

# The ladder rows that are one layer's attention; the bench's step, engine and batch rows time
# whole tokens and are not per layer. "layer-batch" rows are one layer over B sequences (the
# shape of a peer's batch-B call).
LADDER_LAYER_KIND = "layer"
LADDER_LAYER_BATCH_KIND = "layer-batch"
LADDER_PREFIX = "ladder "


class InputError(Exception):
    """Input that cannot be plotted; the message names the file and what is wrong."""


def load(path, what):
    """The JSON object in `path`; `what` names the expected producer in messages."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise InputError("%s: no such file (expected %s)" % (path, what)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("%s: cannot read: %s" % (path, e)) from None
    except json.JSONDecodeError as e:
        raise InputError("%s: not JSON (expected %s): %s" % (path, what, e)) from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise InputError("%s: no 'rows' list: not %s" % (path, what))
    return data


def positive_number(row, key, path, index):
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError("%s: row %d: '%s' must be a positive number, got %r" % (path, index, key, value))
    return float(value)


def ladder_series(report, path, batches=(1,)):
    """{route case: [(depth, us, fraction of ceiling)]} from `ladder bench --json` output: the
    single-layer rows, and the layer-batch rows of the batches named."""
    series = {}
    for index, row in enumerate(report["rows"]):
        if not isinstance(row, dict):
            raise InputError("%s: row %d is not an object" % (path, index))
        if "who" in row:
            raise InputError("%s: rows have 'who': this is bench/peers.py output, pass it as --peers" % path)
        if "kind" not in row or "name" not in row:
            raise InputError("%s: row %d has no 'kind' and 'name': not `ladder bench --json` output" % (path, index))
        batch_row = row["kind"] == LADDER_LAYER_BATCH_KIND and row.get("batch") in batches
        if row["kind"] != LADDER_LAYER_KIND and not batch_row:
            continue
        depth = positive_number(row, "depth", path, index)
        us = positive_number(row, "median_us", path, index)
        fraction = row.get("fraction_of_ceiling")
        series.setdefault(LADDER_PREFIX + str(row["name"]), []).append((depth, us, fraction))
    if not series:
        raise InputError("%s: no '%s' rows (single-layer timings) to plot" % (path, LADDER_LAYER_KIND))
    return series


def peer_series(peers, path, batches):
    """{peer (batch b): [(depth, us, fraction of ceiling)]} from peers.json's table. Its ladder
    rows are copies of the bench's and are skipped; unmeasured peers (a 'status') too."""
    series = {}
    for index, row in enumerate(peers["rows"]):
        if not isinstance(row, dict):
            raise InputError("%s: row %d is not an object" % (path, index))
        if "kind" in row:
            raise InputError("%s: rows have 'kind': this is `ladder bench --json` output, pass it as --bench" % path)
        if "who" not in row or "batch" not in row:
            raise InputError("%s: row %d has no 'who' and 'batch': not bench/peers.py output" % (path, index))
        who = str(row["who"])
        if who.startswith(LADDER_PREFIX) or "status" in row or row["batch"] not in batches:
            continue
        depth = positive_number(row, "depth", path, index)
        us = positive_number(row, "median_us", path, index)
        label = who if batches == [1] else "%s (batch %d)" % (who, row["batch"])
        series.setdefault(label, []).append((depth, us, row.get("fraction_of_ceiling")))
    return series


def title(report, peers):
    """Device and date, from whichever input has them."""
    device = (report or {}).get("device_name") or (peers or {}).get("device") or "unknown device"
    date = str((report or {}).get("date") or (peers or {}).get("date") or "")[:10]
    return "decode attention per layer: %s%s" % (device, ", " + date if date else "")


def draw(report, peers, path, batches=(1,), report_path="bench.json", peers_path="peers.json"):
    """Writes the PNG; returns {label: [(depth, us)]} as drawn. Raises InputError on bad input
    before anything is drawn."""
    batches = list(batches)
    series = {}
    if report is not None:
        series.update(ladder_series(report, report_path, batches))
    if peers is not None:
        series.update(peer_series(peers, peers_path, batches))
    if not series:
        raise InputError("nothing to plot: give --bench and/or --peers")
    try:
        import matplotlib
    except ImportError:
        raise InputError("bench/plot.py needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_f) = plt.subplots(1, 2, figsize=(13, 5))
    colors = plt.cm.tab20.colors  # twenty distinct colours: one per line
    drawn = {}
    for index, (label, points) in enumerate(sorted(series.items())):
        points.sort()
        depth = [p[0] for p in points]
        style = "-o" if label.startswith(LADDER_PREFIX) else "--s"
        color = colors[index % len(colors)]
        ax_t.plot(depth, [p[1] for p in points], style, label=label, color=color)
        with_fraction = [p for p in points if isinstance(p[2], (int, float)) and not isinstance(p[2], bool)]
        if with_fraction:
            ax_f.plot([p[0] for p in with_fraction], [p[2] for p in with_fraction], style, label=label, color=color)
        drawn[label] = [(p[0], p[1]) for p in points]
    for ax in (ax_t, ax_f):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("depth (tokens of KV read)")
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("time per layer (us, median)")
    ax_f.set_ylabel("fraction of bandwidth ceiling")
    ax_f.set_ylim(0, 1.05)
    ax_t.legend(fontsize=7)
    fig.suptitle(title(report, peers))
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise InputError("%s: cannot write: %s" % (path, e)) from None
    finally:
        plt.close(fig)
    return drawn


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", help="`ladder bench --json` output")
    ap.add_argument("--peers", help="bench/peers.py's peers.json")
    ap.add_argument("--batches", default="1", help="peer batches to draw, comma-separated (default 1)")
    ap.add_argument("--out", required=True, help="the PNG to write")
    args = ap.parse_args(argv)
    try:
        try:
            batches = [int(b) for b in args.batches.split(",")]
        except ValueError:
            raise InputError("--batches must be comma-separated integers, got %r" % args.batches) from None
        report = load(args.bench, "`ladder bench --json` output") if args.bench else None
        peers = load(args.peers, "bench/peers.py's peers.json") if args.peers else None
        drawn = draw(report, peers, args.out, batches, args.bench, args.peers)
    except InputError as e:
        print("plot.py: error: %s" % e, file=sys.stderr)
        return 2
    print("wrote %s: %d lines (%s)" % (args.out, len(drawn), ", ".join(sorted(drawn))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
