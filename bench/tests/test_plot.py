"""bench/plot.py on the committed benchmark outputs under docs/bench/, and its refusals of bad
input (scripts/test.sh runs this with the Python tests; needs matplotlib)."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLOT = ROOT / "bench" / "plot.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Every committed H200 run that has both a bench and a peers file.
RUNS = sorted(p.parent for p in (ROOT / "docs" / "bench").glob("h200-*/peers.json") if (p.parent / "bench.json").exists())
# Committed CPU runs: a bench file alone.
CPU_BENCHES = sorted((ROOT / "docs" / "bench").glob("cpu-*/fast*.json"))


def run_plot(*args):
    return subprocess.run([sys.executable, str(PLOT), *map(str, args)], capture_output=True, text=True)


def load_plot_module():
    sys.path.insert(0, str(PLOT.parent))
    try:
        import plot
    finally:
        sys.path.pop(0)
    return plot


def test_committed_runs_exist():
    # The sweeps below must not pass by finding nothing.
    assert RUNS and CPU_BENCHES


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_draws_every_route_and_measured_peer(tmp_path, run):
    bench = json.loads((run / "bench.json").read_text())
    peers = json.loads((run / "peers.json").read_text())
    out = tmp_path / "plot.png"
    drawn = load_plot_module().draw(bench, peers, out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    # One line per route the bench timed per layer, with its rows' medians at their depths.
    layer_rows = [r for r in bench["rows"] if r["kind"] == "layer"]
    for name in {r["name"] for r in layer_rows}:
        expected = sorted((float(r["depth"]), r["median_us"]) for r in layer_rows if r["name"] == name)
        assert drawn["ladder " + name] == expected
    # One line per peer measured at batch 1; unmeasured ones (a status) are not drawn.
    measured = {r["who"] for r in peers["rows"]
                if r["batch"] == 1 and "status" not in r and not r["who"].startswith("ladder ")}
    assert measured
    assert {k for k in drawn if not k.startswith("ladder ")} == measured


def test_command_line_on_the_newest_run(tmp_path):
    run = RUNS[-1]
    out = tmp_path / "plot.png"
    result = run_plot("--bench", run / "bench.json", "--peers", run / "peers.json", "--batches", "1,16", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "(batch 16)" in result.stdout
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_batch_rows_of_ladder_are_drawn_when_their_batch_is_named(tmp_path):
    # The newest run with ladder's one-layer-over-a-batch rows: one line per layer class, its
    # medians at their depths; none when only batch 1 is named.
    run = [r for r in RUNS if any(x["kind"] == "layer-batch" for x in json.loads((r / "bench.json").read_text())["rows"])][-1]
    bench = json.loads((run / "bench.json").read_text())
    peers = json.loads((run / "peers.json").read_text())
    plot = load_plot_module()
    batch_rows = [r for r in bench["rows"] if r["kind"] == "layer-batch" and r["batch"] == 16]
    assert batch_rows
    drawn = plot.draw(bench, peers, tmp_path / "b16.png", [1, 16])
    for name in {r["name"] for r in batch_rows}:
        assert drawn["ladder " + name] == sorted((float(r["depth"]), r["median_us"]) for r in batch_rows
                                                 if r["name"] == name)
    assert not any(", batch 16" in k for k in plot.draw(bench, peers, tmp_path / "b1.png") if k.startswith("ladder "))


@pytest.mark.parametrize("bench", CPU_BENCHES, ids=lambda p: p.parent.name + "/" + p.name)
def test_a_cpu_bench_alone(tmp_path, capsys, bench):
    out = tmp_path / "plot.png"
    assert load_plot_module().main(["--bench", str(bench), "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.read_bytes()[:8] == PNG_MAGIC


def bad_inputs(tmp_path):
    """(arguments, words the message must hold) for each kind of bad input."""
    run = RUNS[-1]
    bench = json.loads((run / "bench.json").read_text())
    cases = []

    def write(name, text):
        path = tmp_path / name
        path.write_text(text)
        return path

    cases.append((["--bench", tmp_path / "missing.json"], "no such file"))
    cases.append((["--bench", write("torn.json", '{"rows": [')], "not JSON"))
    cases.append((["--bench", write("list.json", "[1, 2]")], "no 'rows' list"))
    cases.append((["--bench", run / "peers.json"], "pass it as --peers"))
    cases.append((["--peers", run / "bench.json"], "pass it as --bench"))
    no_layers = dict(bench, rows=[r for r in bench["rows"] if r["kind"] != "layer"])
    cases.append((["--bench", write("no_layers.json", json.dumps(no_layers))], "no 'layer' rows"))
    for field, value in (("median_us", None), ("median_us", -1.0), ("depth", 0), ("median_us", "fast")):
        rows = [dict(r) for r in bench["rows"]]
        first_layer = next(i for i, r in enumerate(rows) if r["kind"] == "layer")
        rows[first_layer][field] = value
        if value is None:
            del rows[first_layer][field]
        path = write("bad_%s_%s.json" % (field, value), json.dumps(dict(bench, rows=rows)))
        cases.append((["--bench", path], "row %d: '%s' must be a positive number" % (first_layer, field)))
    cases.append((["--bench", run / "bench.json", "--batches", "one"], "--batches"))
    cases.append(([], "nothing to plot"))
    return cases


def test_bad_input_is_refused_with_a_message_and_no_image(tmp_path, capsys):
    plot = load_plot_module()
    for args, words in bad_inputs(tmp_path):
        out = tmp_path / "never.png"
        code = plot.main([str(a) for a in args] + ["--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2, (args, err)
        assert err.startswith("plot.py: error: "), err
        assert words in err, (words, err)
        assert not out.exists()


def test_a_folder_that_does_not_exist_is_refused(tmp_path):
    run = RUNS[-1]
    result = run_plot("--bench", run / "bench.json", "--out", tmp_path / "absent" / "plot.png")
    assert result.returncode == 2
    assert "cannot write" in result.stderr
