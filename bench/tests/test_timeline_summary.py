"""scripts/timeline_summary.py on made-up timelines whose answers are known by construction: a
three-layer chain (producer then reducer per layer, fixed gaps) and two back-to-back replays of
a batched launch whose CTAs walk two slots each (scripts/test.sh runs this with the Python
tests)."""
import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "timeline_summary.py"
spec = importlib.util.spec_from_file_location("timeline_summary", SCRIPT)
ts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ts)

US = 1000  # the records count nanoseconds


def rec(ns, tag, cta, kernel, event, aux=0):
    return ts.RECORD.pack(ns, tag, cta, 0, kernel, event, aux)


def write(tmp, name, records, tags=None):
    (tmp / f"{name}.bin").write_bytes(b"".join(records))
    if tags is not None:
        (tmp / f"{name}.tags").write_text("".join(f"{s} {l} {q} {o}\n" for s, l, q, o in tags))
    return tmp / f"{name}.bin"


def chain(layers):
    """Per layer: a producer of two CTAs (entry at +0, wait passed at +1, exits at +3 and +4 us)
    and a reducer (entry at +5, exit at +6 us); the next layer starts at +7 us."""
    out, tags = [], []
    for l in range(layers):
        t0 = 10 * US + l * 7 * US
        q, o = 1000 + l, 2000 + l
        tags.append((0, l, q, o))
        for cta, end in ((0, 3), (1, 4)):
            out += [rec(t0, q, cta, ts.PRODUCER, ts.ENTRY), rec(t0 + US, q, cta, ts.PRODUCER, ts.WAITED),
                    rec(t0 + US, q, cta, ts.PRODUCER, ts.SLOT_BEGIN, cta),
                    rec(t0 + 2 * US, q, cta, ts.PRODUCER, ts.SLOT_FOLDED, cta),
                    rec(t0 + end * US, q, cta, ts.PRODUCER, ts.EXIT)]
        out += [rec(t0 + 5 * US, o, 0, ts.REDUCER, ts.ENTRY), rec(t0 + 6 * US, o, 0, ts.REDUCER, ts.EXIT)]
    return out, tags


def test_chain_gives_the_per_layer_time_and_each_gap(tmp_path):
    records, tags = chain(3)
    lines = ts.summarize(write(tmp_path, "step", records, tags))
    text = "\n".join(lines)
    assert "layers 3; last exit to last exit per layer: median 7.00 us" in text
    # The reducer starts 1 us after the producer's last exit and runs 1 us.
    assert "reducer (us, median over 3): first entry - previous last exit 1.00" in text
    assert "last exit - first entry 1.00" in text
    # The producer: from the previous reducer's exit to its first CTA, 1 us; its own span 4 us.
    assert "producer (us, median over 3): first entry - previous last exit 1.00" in text
    assert "slot fold (begin -> folded): median 1.00 us" in text


def test_replays_are_split_at_the_producer_after_a_reducer(tmp_path):
    records = []
    for replay in range(2):
        t0 = replay * 100 * US
        for cta in range(4):
            records += [rec(t0, 7, cta, ts.PRODUCER, ts.ENTRY),
                        rec(t0 + US, 7, cta, ts.PRODUCER, ts.SLOT_BEGIN, 2 * cta),
                        rec(t0 + 3 * US, 7, cta, ts.PRODUCER, ts.SLOT_FOLDED, 2 * cta),
                        rec(t0 + 5 * US, 7, cta, ts.PRODUCER, ts.SLOT_BEGIN, 2 * cta + 1),
                        rec(t0 + 7 * US, 7, cta, ts.PRODUCER, ts.SLOT_FOLDED, 2 * cta + 1),
                        rec(t0 + 9 * US, 7, cta, ts.PRODUCER, ts.EXIT)]
        records += [rec(t0 + 10 * US, 9, 0, ts.REDUCER, ts.ENTRY), rec(t0 + 12 * US, 9, 0, ts.REDUCER, ts.EXIT)]
    text = "\n".join(ts.summarize(write(tmp_path, "batch", records)))
    assert "replays 2: span median 12.00 us" in text
    assert "producer launches 2, CTAs 8 (2 slots each); launch span median 9.00 us" in text
    assert "slot fold (begin -> folded): median 2.00 us" in text
    # Across the slot end: folded at +3, the next slot begins at +5.
    assert "slot end (folded -> next slot begin: partial write, next prologue): median 2.00 us" in text


def test_a_truncated_file_is_refused(tmp_path):
    (tmp_path / "bad.bin").write_bytes(b"\0" * 33)
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0 and "whole number" in r.stderr


def test_an_engine_calls_prefix_is_timed_from_the_state_fetch(tmp_path):
    records = []
    for replay in range(3):
        t0 = replay * 50 * US
        records += [rec(t0, 1, 0, ts.FETCH, ts.ENTRY), rec(t0 + 2 * US, 1, 0, ts.FETCH, ts.EXIT),
                    rec(t0 + 3 * US, 2, 0, ts.COUNT, ts.ENTRY), rec(t0 + 4 * US, 2, 0, ts.COUNT, ts.EXIT),
                    rec(t0 + 5 * US, 7, 0, ts.PRODUCER, ts.ENTRY), rec(t0 + 6 * US, 7, 0, ts.PRODUCER, ts.WAITED),
                    rec(t0 + 6 * US, 7, 0, ts.PRODUCER, ts.SLOT_BEGIN, 0),
                    rec(t0 + 8 * US, 7, 0, ts.PRODUCER, ts.SLOT_FOLDED, 0),
                    rec(t0 + 9 * US, 7, 0, ts.PRODUCER, ts.SLOT_ISSUED, 0),
                    rec(t0 + 11 * US, 7, 0, ts.PRODUCER, ts.SLOT_WRITTEN, 0),
                    rec(t0 + 11 * US, 7, 0, ts.PRODUCER, ts.SLOT_BEGIN, 1),
                    rec(t0 + 13 * US, 7, 0, ts.PRODUCER, ts.SLOT_FOLDED, 1),
                    rec(t0 + 14 * US, 7, 0, ts.PRODUCER, ts.EXIT),
                    rec(t0 + 15 * US, 9, 0, ts.REDUCER, ts.ENTRY), rec(t0 + 16 * US, 9, 0, ts.REDUCER, ts.EXIT)]
    text = "\n".join(ts.summarize(write(tmp_path, "engine", records)))
    assert "replays 3: span median 16.00 us" in text
    assert ("from the state fetch's first entry (us, medians over replays): state fetch exit 2.00, input count entry "
            "3.00, input count exit 4.00, producer first entry 5.00, producer first wait passed 6.00, producer last "
            "exit 14.00, reducer first entry 15.00, reducer last exit 16.00") in text
    assert "slot end (folded -> next slot begin: partial write, next prologue): median 3.00 us" in text
    assert "of a slot end: the next slot's copies issued 1.00 us, then the partial written 2.00 us" in text


def test_a_slots_first_block_splits_its_fold(tmp_path):
    # One CTA walks two slots: slot 0 begins at +1, its first block lands at +2, it is folded at
    # +5; slot 1 begins at +6, its first block lands at +9 (a long wait), it is folded at +10.
    records = [rec(0, 7, 0, ts.PRODUCER, ts.ENTRY),
               rec(1 * US, 7, 0, ts.PRODUCER, ts.SLOT_BEGIN, 0),
               rec(2 * US, 7, 0, ts.PRODUCER, ts.SLOT_FIRST_BLOCK, 0),
               rec(5 * US, 7, 0, ts.PRODUCER, ts.SLOT_FOLDED, 0),
               rec(6 * US, 7, 0, ts.PRODUCER, ts.SLOT_BEGIN, 1),
               rec(9 * US, 7, 0, ts.PRODUCER, ts.SLOT_FIRST_BLOCK, 1),
               rec(10 * US, 7, 0, ts.PRODUCER, ts.SLOT_FOLDED, 1),
               rec(11 * US, 7, 0, ts.PRODUCER, ts.EXIT),
               rec(12 * US, 9, 0, ts.REDUCER, ts.ENTRY), rec(13 * US, 9, 0, ts.REDUCER, ts.EXIT)]
    text = "\n".join(ts.summarize(write(tmp_path, "first", records)))
    # Waits of 1 and 3 us (median 2), then folds of 3 and 1 us after the landing (median 2).
    assert "begin -> first block landed median 2.00 us (p90 3.00), first block landed -> folded 2.00 us" in text
    assert "slot fold (begin -> folded): median 4.00 us" in text


def test_without_first_block_marks_no_split_is_printed(tmp_path):
    records, tags = chain(2)
    assert "first block landed" not in "\n".join(ts.summarize(write(tmp_path, "old", records, tags)))


def test_the_exits_are_told_by_quantile_and_by_sm(tmp_path):
    # Four CTAs of one launch on two SMs: SM 3 holds CTAs 0 and 1 (exits at +10 and +12 us), SM 7
    # CTAs 2 and 3 (exits at +20 and +22 us); every CTA enters at 0 and walks one slot.
    records = []
    for cta, sm, out in ((0, 3, 10), (1, 3, 12), (2, 7, 20), (3, 7, 22)):
        records += [ts.RECORD.pack(0, 7, cta, sm, ts.PRODUCER, ts.ENTRY, 0),
                    ts.RECORD.pack(1 * US, 7, cta, sm, ts.PRODUCER, ts.SLOT_BEGIN, cta),
                    ts.RECORD.pack(5 * US, 7, cta, sm, ts.PRODUCER, ts.SLOT_FOLDED, cta),
                    ts.RECORD.pack(out * US, 7, cta, sm, ts.PRODUCER, ts.EXIT, 0)]
    records += [rec(30 * US, 9, 0, ts.REDUCER, ts.ENTRY), rec(31 * US, 9, 0, ts.REDUCER, ts.EXIT)]
    text = "\n".join(ts.summarize(write(tmp_path, "tail", records)))
    assert "CTA exits spread (first to last exit of a launch): median 12.00 us" in text
    assert "first 10.00, p10 10.00, median 20.00, last 22.00 us" in text
    assert "by SM (2 SMs, 0 of them with one CTA): mean exit earliest 11.00, latest 21.00 us" in text
