"""scripts/bench_variants.sh: its medians table (--summary) on a made-up run and on the committed
probe run under docs/bench/, and its refusals (scripts/test.sh runs this with the Python tests)."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_variants.sh"
COMMITTED = ROOT / "docs" / "bench" / "h200-2026-12-04-reducer-probe" / "variants.txt"

HEADER = "kind    case                   depth   median_us      GB/s  of_ceil\n"


def row(kind, case, depth, us):
    return f"{kind:<7} {case:<22} {depth:>7} {us:>11.2f}     245.9    0.056\n"


def run(*args):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def table(out):
    """{(kind, case, depth): [median per variant, in the header's order]} and the header's names."""
    lines = out.splitlines()
    names = lines[0].split()[3:-4]
    parsed = {}
    for line in lines[1:]:
        f = line.split()
        # kind, case words, depth, then per variant a median and (after the first) a ratio
        n_cells = 1 + 2 * (len(names) - 1)
        cells = f[-n_cells:]
        depth = f[-n_cells - 1]
        parsed[(f[0], " ".join(f[1:-n_cells - 1]), depth)] = [float(cells[0])] + [float(c) for c in cells[1::2]]
    return names, parsed


def test_medians_per_variant_in_order_and_ratio_to_the_first(tmp_path):
    us = {"base": [9.0, 7.0, 7.5], "fast": [6.0, 4.0, 4.5], "slow": [20.0, 21.0, 30.0]}
    text = ""
    for r in range(3):
        for name in ("base", "fast", "slow"):
            text += f"== {name} round {r + 1} (09:00:00Z): /tmp/{name}\n" + HEADER
            text += row("layer", "splitk/ring", "2048", us[name][r])
            text += row("step", "step, chained + PDL", "2048", 10 * us[name][r])
    path = tmp_path / "variants.txt"
    path.write_text(text)
    done = run("--summary", path)
    assert done.returncode == 0, done.stderr
    names, parsed = table(done.stdout)
    assert names == ["base", "fast", "slow"]
    assert parsed[("layer", "splitk/ring", "2048")] == [7.5, 4.5, 21.0]
    assert parsed[("step", "step, chained + PDL", "2048")] == [75.0, 45.0, 210.0]
    ratios = [line.split()[-1] for line in done.stdout.splitlines()[1:]]
    assert ratios == ["2.80", "2.80"]  # slow / base


def test_a_failed_run_header_stops_counting_its_rows(tmp_path):
    text = "== base round 1 (09:00:00Z): /tmp/base\n" + HEADER + row("layer", "splitk/ring", "2048", 5.0)
    text += "== (exit 1 from base round 1)\n" + row("layer", "splitk/ring", "2048", 999.0)
    path = tmp_path / "variants.txt"
    path.write_text(text)
    done = run("--summary", path)
    assert done.returncode == 0, done.stderr
    assert table(done.stdout)[1][("layer", "splitk/ring", "2048")] == [5.0]


def test_committed_probe_run_summarizes_as_recorded():
    done = run("--summary", COMMITTED)
    assert done.returncode == 0, done.stderr
    recorded = (COMMITTED.parent / "variants-summary.txt").read_text()
    assert done.stdout == recorded


def test_refuses_missing_variants_and_duplicate_names(tmp_path):
    assert run("2", "--", "--depths", "2048").returncode == 2
    assert run("x", tmp_path / "a", "--").returncode == 2
    exe = tmp_path / "ladder"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    other = tmp_path / "d"
    other.mkdir()
    twin = other / "ladder"
    twin.write_text("#!/bin/sh\nexit 0\n")
    twin.chmod(0o755)
    done = run("1", exe, twin, "--")
    assert done.returncode == 2 and "two variants named ladder" in done.stderr
    assert run("1", tmp_path / "missing", "--").returncode == 2
