#!/usr/bin/env python3
"""Summarizes the kernel timelines a diagnostic build of `ladder bench` writes.

A build configured with -DLADDER_DIAG_TIMELINE=ON, run with LADDER_TIMELINE_DIR=DIR, writes for
each row the marks of its last timed replay (include/ladder/cuda/timeline.hpp): DIR/<row>.bin,
32-byte records, and DIR/<row>.tags ("set layer q out" per buffer set and layer). This prints,
per file:

* rows with tags (single layers: one launch chain per buffer set; steps: per layer), where each
  layer's time goes: when its kernels' first CTA starts, when their CTAs pass the PDL wait, when
  the last CTA exits, each relative to the previous kernel's last exit, as medians over layers;
* every row: the producer's CTAs (entry to the wait, each walked slot's fold and what follows
  it to the next slot, CTA exit spread), per launch, and when its CTAs leave: the exits' spread
  from the launch's first entry and each SM's mean exit (a launch whose CTAs all have the same
  work but leave over a wide spread, SM by SM, has a tail that balancing could cut). Marks are
  grouped into launches by kernel and tag, and a batched producer's tag is each entry's q: each
  sequence of a batched launch counts as one launch here. A call's first batched producer (right
  behind the state fetch) marks its entry only after its PDL wait and its entry's load, so its
  "entry -> wait passed" is the first copies' issue alone, not a wait (docs/gpu.md).

usage: scripts/timeline_summary.py DIR [DIR...]
"""
from __future__ import annotations

import statistics
import struct
import sys
from collections import defaultdict
from pathlib import Path

RECORD = struct.Struct("<QQIIHHi")
PRODUCER, REDUCER, LINK, FETCH, COUNT = 1, 2, 3, 4, 5
KERNEL_NAMES = {PRODUCER: "producer", REDUCER: "reducer", LINK: "link", FETCH: "state fetch", COUNT: "input count"}
ENTRY, WAITED, SLOT_BEGIN, SLOT_FOLDED, EXIT, SLOT_ISSUED, SLOT_WRITTEN, SLOT_FIRST_BLOCK = 0, 1, 2, 3, 4, 5, 6, 7


def read_records(path: Path) -> list[tuple]:
    data = path.read_bytes()
    if len(data) % RECORD.size:
        raise SystemExit(f"{path}: {len(data)} bytes is not a whole number of {RECORD.size}-byte records")
    return [RECORD.unpack_from(data, i) for i in range(0, len(data), RECORD.size)]


def read_tags(path: Path) -> list[tuple[int, int, int, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            s, l, q, o = line.split()
            out.append((int(s), int(l), int(q), int(o)))
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


class Launch:
    """The marks of one kernel launch (one kernel kind and tag; the file holds one replay)."""

    def __init__(self, kernel: int, tag: int):
        self.kernel, self.tag = kernel, tag
        self.by_event: dict[int, list[int]] = defaultdict(list)
        self.ctas: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
        self.sm_of: dict[int, int] = {}

    def add(self, ns: int, cta: int, event: int, aux: int, sm: int | None = None) -> None:
        self.by_event[event].append(ns)
        self.ctas[cta][event].append((ns, aux))
        if sm is not None:
            self.sm_of[cta] = sm

    def first(self, event: int) -> float:
        v = self.by_event.get(event)
        return min(v) if v else float("nan")

    def last(self, event: int) -> float:
        v = self.by_event.get(event)
        return max(v) if v else float("nan")


def launches_of(records: list[tuple]) -> list[Launch]:
    """Launches by (kernel, tag), in order of their first mark."""
    table: dict[tuple[int, int], Launch] = {}
    for ns, tag, cta, sm, kernel, event, aux in records:
        key = (kernel, tag)
        if key not in table:
            table[key] = Launch(kernel, tag)
        table[key].add(ns, cta, event, aux, sm)
    return sorted(table.values(), key=lambda x: x.first(ENTRY))


# What chain_summary prints per kernel, in this order (each against the previous kernel's last exit
# in the chain, or within the kernel).
CHAIN_COLUMNS = ("first entry - previous last exit", "first wait passed - previous last exit",
                 "last exit - previous last exit", "last exit - first entry", "last exit - last wait passed")


def split_replays(records: list[tuple]) -> list[list[tuple]]:
    """A file of several back-to-back replays of one graph (the layer-batch rows) as one list per
    replay: a replay begins at its first kernel's first entry after a reducer mark (the engine
    call's state fetch, or the producer where nothing before it records)."""
    out: list[list[tuple]] = []
    seen_reducer = True
    first_kernel = FETCH if any(r[4] == FETCH for r in records) else PRODUCER
    for r in sorted(records):
        if r[4] == first_kernel and r[5] == ENTRY and seen_reducer:
            out.append([])
            seen_reducer = False
        if r[4] == REDUCER:
            seen_reducer = True
        if out:
            out[-1].append(r)
    return out


def chain_summary(launches: list[Launch], tags: list[tuple[int, int, int, int]]) -> list[str]:
    """Per layer, in launch order: each kernel against the previous kernel's last exit."""
    layer_of = {}
    for s, l, q, o in tags:
        layer_of[(PRODUCER, q)] = (s, l)
        layer_of[(REDUCER, o)] = (s, l)
        layer_of[(LINK, o)] = (s, l)
    chain = [x for x in launches if (x.kernel, x.tag) in layer_of]
    chain.sort(key=lambda x: x.last(EXIT))
    rows = defaultdict(lambda: defaultdict(list))
    prev_exit = None
    per_layer_end = []
    for x in chain:
        name = KERNEL_NAMES[x.kernel]
        if prev_exit is not None:
            rows[name]["first entry - previous last exit"].append(x.first(ENTRY) - prev_exit)
            if x.by_event.get(WAITED):
                rows[name]["first wait passed - previous last exit"].append(x.first(WAITED) - prev_exit)
            rows[name]["last exit - previous last exit"].append(x.last(EXIT) - prev_exit)
        rows[name]["last exit - first entry"].append(x.last(EXIT) - x.first(ENTRY))
        if x.by_event.get(WAITED):
            rows[name]["last exit - last wait passed"].append(x.last(EXIT) - x.last(WAITED))
        prev_exit = x.last(EXIT)
        per_layer_end.append((layer_of[(x.kernel, x.tag)], x.kernel, prev_exit))
    out = []
    ends = [t for (_, k, t) in per_layer_end if k == REDUCER] or [t for (_, k, t) in per_layer_end if k == PRODUCER]
    if len(ends) > 1:
        steps = [b - a for a, b in zip(ends, ends[1:])]
        out.append(f"  layers {len(ends)}; last exit to last exit per layer: median {med(steps) / 1e3:.2f} us, "
                   f"min {min(steps) / 1e3:.2f}, max {max(steps) / 1e3:.2f}; whole chain "
                   f"{(chain[-1].last(EXIT) - chain[0].first(ENTRY)) / 1e3:.1f} us")
    for name in ("link", "producer", "reducer"):
        if name in rows:
            parts = ", ".join(f"{k} {med(rows[name][k]) / 1e3:.2f}" for k in CHAIN_COLUMNS if rows[name].get(k))
            out.append(f"  {name} (us, median over {len(rows[name]['last exit - first entry'])}): {parts}")
    return out


def producer_summary(launches: list[Launch]) -> list[str]:
    """The producer launches' CTAs: the wait, each slot's fold, the slot ends, the exit spread."""
    prods = [x for x in launches if x.kernel == PRODUCER and x.by_event.get(SLOT_BEGIN)]
    if not prods:
        return []
    to_wait, fold, between, exit_spread, span, slots_per_cta, first_slot = [], [], [], [], [], [], []
    issue, write, first_wait, after_first = [], [], [], []
    exit_q = defaultdict(list)  # quantile -> per launch, the CTAs' exits after its first entry
    sm_first, sm_last, sms, single = [], [], [], []
    q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * len(xs)))] if xs else float("nan")
    for x in prods:
        span.append(x.last(EXIT) - x.first(ENTRY))
        exits = x.by_event.get(EXIT, [])
        if exits:
            exit_spread.append(max(exits) - min(exits))
            t0 = x.first(ENTRY)
            for name, f in (("first", 0.0), ("p10", 0.1), ("median", 0.5), ("last", 1.0)):
                exit_q[name].append(q(exits, f) - t0)
            by_sm = defaultdict(list)
            for cta, ev in x.ctas.items():
                if ev.get(EXIT) and cta in x.sm_of:
                    by_sm[x.sm_of[cta]].append(max(t for t, _ in ev[EXIT]) - t0)
            if by_sm:
                means = [statistics.mean(v) for v in by_sm.values()]
                sm_first.append(min(means))
                sm_last.append(max(means))
                sms.append(len(by_sm))
                single.append(sum(1 for v in by_sm.values() if len(v) == 1))
        for cta, ev in x.ctas.items():
            entry = min(t for t, _ in ev[ENTRY]) if ev.get(ENTRY) else None
            if entry is not None and ev.get(WAITED):
                to_wait.append(min(t for t, _ in ev[WAITED]) - entry)
            begins = sorted(ev.get(SLOT_BEGIN, []))
            folds = sorted(ev.get(SLOT_FOLDED, []))
            slots_per_cta.append(len(begins))
            if begins and entry is not None:
                first_slot.append(begins[0][0] - entry)
            landed = dict((a, t) for t, a in ev.get(SLOT_FIRST_BLOCK, []))
            for t, a in begins:
                if a in landed:
                    first_wait.append(landed[a] - t)
            for t, a in folds:
                if a in landed:
                    after_first.append(t - landed[a])
            issued = dict((a, t) for t, a in ev.get(SLOT_ISSUED, []))
            written = dict((a, t) for t, a in ev.get(SLOT_WRITTEN, []))
            for t, a in folds:
                if a in issued:
                    issue.append(issued[a] - t)
                    if a in written:
                        write.append(written[a] - issued[a])
            for i, (b, _) in enumerate(begins):
                if i < len(folds):
                    fold.append(folds[i][0] - b)
                if i + 1 < len(begins) and i < len(folds):
                    between.append(begins[i + 1][0] - folds[i][0])
    lines = [
        f"  producer launches {len(prods)}, CTAs {len(slots_per_cta)} ({med(slots_per_cta):.0f} slots each); "
        f"launch span median {med(span) / 1e3:.2f} us",
        f"  CTA entry -> wait passed: median {med(to_wait) / 1e3:.2f} us; entry -> first slot {med(first_slot) / 1e3:.2f}",
        f"  slot fold (begin -> folded): median {med(fold) / 1e3:.2f} us, p10 {q(fold, .1) / 1e3:.2f}, "
        f"p90 {q(fold, .9) / 1e3:.2f}",
        f"  slot end (folded -> next slot begin: partial write, next prologue): median {med(between) / 1e3:.2f} us, "
        f"p90 {q(between, .9) / 1e3:.2f}",
        f"  CTA exits spread (first to last exit of a launch): median {med(exit_spread) / 1e3:.2f} us",
    ]
    if exit_q:
        lines.append(f"  CTA exits after the launch's first entry (medians over launches): first "
                     f"{med(exit_q['first']) / 1e3:.2f}, p10 {med(exit_q['p10']) / 1e3:.2f}, median "
                     f"{med(exit_q['median']) / 1e3:.2f}, last {med(exit_q['last']) / 1e3:.2f} us")
    if sms:
        lines.append(f"  by SM ({med(sms):.0f} SMs, {med(single):.0f} of them with one CTA): mean exit earliest "
                     f"{med(sm_first) / 1e3:.2f}, latest {med(sm_last) / 1e3:.2f} us (medians over launches)")
    if issue:
        lines.append(f"  of a slot end: the next slot's copies issued {med(issue) / 1e3:.2f} us, then the partial "
                     f"written {med(write) / 1e3:.2f} us (medians, every slot; the last slot issues nothing)")
    if first_wait:
        lines.append(f"  of a slot fold: begin -> first block landed median {med(first_wait) / 1e3:.2f} us (p90 "
                     f"{q(first_wait, .9) / 1e3:.2f}), first block landed -> folded {med(after_first) / 1e3:.2f} us")
    return lines


def prefix_summary(replays: list[list[tuple]]) -> list[str]:
    """An engine call's kernels before the producer (state fetch, input count), per replay."""
    rows = defaultdict(list)
    for r in replays:
        ls: dict[int, Launch] = {}  # every launch of a kernel in the replay as one
        for ns, _tag, cta, _sm, kernel, event, aux in r:
            ls.setdefault(kernel, Launch(kernel, 0)).add(ns, cta, event, aux)
        if FETCH not in ls or PRODUCER not in ls:
            continue
        t0 = ls[FETCH].first(ENTRY)
        rows["state fetch exit"].append(ls[FETCH].last(EXIT) - t0)
        if COUNT in ls:
            rows["input count entry"].append(ls[COUNT].first(ENTRY) - t0)
            rows["input count exit"].append(ls[COUNT].last(EXIT) - t0)
        rows["producer first entry"].append(ls[PRODUCER].first(ENTRY) - t0)
        if ls[PRODUCER].by_event.get(WAITED):
            rows["producer first wait passed"].append(ls[PRODUCER].first(WAITED) - t0)
        rows["producer last exit"].append(ls[PRODUCER].last(EXIT) - t0)
        if REDUCER in ls:
            # A batched reducer marks its entry after its PDL wait (reduce.cu): the gap from the
            # producer's last exit to it is time with no kernel of the call running.
            rows["reducer first entry"].append(ls[REDUCER].first(ENTRY) - t0)
            rows["reducer last exit"].append(ls[REDUCER].last(EXIT) - t0)
    if not rows:
        return []
    return ["  from the state fetch's first entry (us, medians over replays): " +
            ", ".join(f"{k} {med(v) / 1e3:.2f}" for k, v in rows.items())]


def summarize(path: Path) -> list[str]:
    records = read_records(path)
    out = [f"{path.name}: {len(records)} marks"]
    if not records:
        return out
    ns = [r[0] for r in records]
    out.append(f"  span {(max(ns) - min(ns)) / 1e3:.1f} us")
    tags = read_tags(path.with_suffix(".tags"))
    if tags:
        launches = launches_of(records)
        out += chain_summary(launches, tags)
    else:
        replays = split_replays(records)
        out.append(f"  replays {len(replays)}: span median "
                   f"{med([max(r)[0] - min(r)[0] for r in replays if r]) / 1e3:.2f} us")
        launches = [x for r in replays for x in launches_of(r)]
        out += prefix_summary(replays)
    out += producer_summary(launches)
    red = [x for x in launches if x.kernel == REDUCER]
    if red:
        out.append(f"  reducer launches {len(red)}: span median {med([x.last(EXIT) - x.first(ENTRY) for x in red]) / 1e3:.2f} us")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    for d in argv[1:]:
        for path in sorted(Path(d).glob("*.bin")):
            print("\n".join(summarize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
