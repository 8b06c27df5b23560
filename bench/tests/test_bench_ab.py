"""scripts/bench_ab.sh: its medians table (--summary) on a made-up run and on the committed A/B
runs under docs/bench/, and its refusal of a call without binaries (scripts/test.sh runs this
with the Python tests)."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_ab.sh"
# Committed runs of the script (other A/B files there predate it or compare three builds).
COMMITTED = sorted(p for p in (ROOT / "docs" / "bench").glob("*/ab*.txt") if "== B round" in p.read_text())

# Rows as `ladder bench` prints them (kind, case, depth, median_us, then more columns), under the
# round headers the script writes.
HEADER = "kind    case                   depth   median_us      GB/s  of_ceil\n"


def row(kind, case, depth, us):
    return f"{kind:<7} {case:<22} {depth:>7} {us:>11.2f}     245.9    0.056\n"


def summary(path):
    return subprocess.run(["bash", str(SCRIPT), "--summary", str(path)], capture_output=True, text=True)


def columns(out):
    """{(kind, case, depth): the six columns after depth} from the printed table."""
    parsed = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        parsed[(f[0], " ".join(f[1:-7]), f[-7])] = f[-6:]
    return parsed


def table(out):
    """{(kind, case, depth): (a, b, ratio)}."""
    return {key: tuple(float(x) for x in cols[:3]) for key, cols in columns(out).items()}


def spreads(out):
    """{(kind, case, depth): (A lo-hi, B lo-hi, apart)}."""
    return {key: tuple(cols[3:]) for key, cols in columns(out).items()}


def test_medians_per_side_and_ratio(tmp_path):
    # Medians differ from means, so a table of means would fail.
    a_us = {"2048": [9.0, 7.0, 7.5], "131072": [47.0, 45.0, 45.5]}
    b_us = {"2048": [6.0, 4.0, 4.5], "131072": [44.0, 46.0, 44.5]}
    batch_us = [40.0, 41.0, 45.0]
    text = ""
    for r in range(3):
        for side, us in (("A", a_us), ("B", b_us)):
            text += f"== {side} round {r + 1}: /tmp/ladder_{side}\n" + HEADER
            for depth in ("2048", "131072"):
                text += row("layer", "splitk/ring", depth, us[depth][r])
            text += row("layer-batch", "swa (ring) layer, batch 16", "2048", batch_us[r] + (0 if side == "A" else 10))
    path = tmp_path / "ab.txt"
    path.write_text(text)
    done = summary(path)
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    assert rows[("layer", "splitk/ring", "2048")] == (7.5, 4.5, 0.6)
    assert rows[("layer", "splitk/ring", "131072")] == (45.5, 44.5, 0.978)
    assert rows[("layer-batch", "swa (ring) layer, batch 16", "2048")] == (41.0, 51.0, 1.244)
    assert len(rows) == 3
    # Each side's lowest and highest round, and whether the sides' rounds overlap: at 2048 every
    # B round (4.0-6.0) is below every A round (7.0-9.0), and the batch row's B rounds all above
    # A's; at 131072 they interleave.
    spread = spreads(done.stdout)
    assert spread[("layer", "splitk/ring", "2048")] == ("7.00-9.00", "4.00-6.00", "yes")
    assert spread[("layer", "splitk/ring", "131072")] == ("45.00-47.00", "44.00-46.00", "no")
    assert spread[("layer-batch", "swa (ring) layer, batch 16", "2048")] == ("40.00-45.00", "50.00-55.00", "yes")


def test_a_row_missing_on_one_side_reads_nan(tmp_path):
    text = "== A round 1: a\n" + HEADER + row("step", "step", "2048", 450.0)
    # A third build's rows are not counted as the side before them.
    text += "== C round 1: c\n" + HEADER + row("step", "step", "2048", 999.0)
    text += "== B round 1: b\n" + HEADER
    path = tmp_path / "ab.txt"
    path.write_text(text)
    done = summary(path)
    assert done.returncode == 0, done.stderr
    a, b, _ = table(done.stdout)[("step", "step", "2048")]
    assert a == 450.0 and b != b  # NaN: never a made-up number
    assert spreads(done.stdout)[("step", "step", "2048")] == ("450.00-450.00", "-", "-")


def test_the_files_own_medians_table_is_not_a_round(tmp_path):
    # The script appends its medians table to the file it read, under a "== medians" header;
    # summarising that file again must give the same table, not count A's medians as B's.
    text = ""
    for r, (a, b) in enumerate(((7.0, 4.0), (8.0, 5.0))):
        text += f"== A round {r + 1}: a\n" + HEADER + row("layer", "splitk/ring", "2048", a)
        text += f"== B round {r + 1}: b\n" + HEADER + row("layer", "splitk/ring", "2048", b)
    path = tmp_path / "ab.txt"
    path.write_text(text)
    first = summary(path)
    assert first.returncode == 0, first.stderr
    path.write_text(text + "== medians over the rounds\n" + first.stdout)
    again = summary(path)
    assert again.returncode == 0, again.stderr
    assert table(again.stdout) == table(first.stdout) == {("layer", "splitk/ring", "2048"): (7.5, 4.5, 0.6)}


def test_committed_runs_exist():
    assert COMMITTED


@pytest.mark.parametrize("run", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_runs_summarise(run):
    done = summary(run)
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    assert rows, f"no rows parsed from {run}"
    assert all(a > 0 and b > 0 for a, b, _ in rows.values())


def test_refuses_a_call_without_binaries():
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "usage" in done.stderr
