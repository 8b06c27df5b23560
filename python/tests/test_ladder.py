import pytest

import ladder


def state(capacity, length, origin_logical=0, origin_physical=0):
    return ladder.PlaneState(capacity=capacity, len=length, origin_logical=origin_logical,
                             origin_physical=origin_physical)


def test_predicates_are_r1():
    cases = [
        # (class, state, route, vec_rows, swa_vec)
        ("swa", state(2048, 2048), "vec", True, True),                    # full, unwrapped
        ("swa", state(2048, 2048, 100, 100), "vec", True, True),          # full, wrapped
        ("swa", state(2048, 100), "splitk", True, False),                 # ragged length
        ("swa", state(2050, 2048, 100, 7), "splitk", False, False),       # partially wrapped
        ("swa", state(16, 16), "splitk", False, False),                   # capacity < 32
        ("nope", state(4096, 100), "vec", True, False),                   # ragged: vec pads
        ("nope", state(16, 5), "interleaved", False, False),              # capacity < 32
    ]
    for cls, st, route, vec_rows, swa_vec in cases:
        r, p = ladder.choose_route(cls, st, strict=False, disable_vec=False)
        assert (r, p["vec_rows"], p["swa_vec"]) == (route, vec_rows, swa_vec), (cls, st)


def test_disable_vec_and_strict():
    st = state(2048, 2048)
    assert ladder.choose_route("swa", st, disable_vec=True, strict=False)[0] == "splitk"
    assert ladder.choose_route("nope", st, disable_vec=True, strict=False)[0] == "interleaved"
    # strict takes vec rows even without the capability (the chapter's cross-vendor switch)
    assert ladder.choose_route("nope", st, has_vec=False, strict=True, disable_vec=False)[0] == "vec"
    assert ladder.choose_route("nope", st, has_vec=False, strict=False, disable_vec=False)[0] == "interleaved"


def test_env_switch(monkeypatch):
    monkeypatch.setenv("LADDER_DISABLE_VEC", "1")
    assert ladder.choose_route("swa", state(2048, 2048))[0] == "splitk"
    monkeypatch.setenv("LADDER_DISABLE_VEC", "0")
    assert ladder.choose_route("swa", state(2048, 2048), strict=False)[0] == "vec"


def test_staging_switch_takes_wrapped_rings():
    r, p = ladder.choose_route("swa", state(2050, 2048, 100, 7), stage_wrapped_swa=True, strict=False,
                               disable_vec=False)
    assert r == "staged" and p["stage"]


def test_route_trace():
    g = ladder.Geometry.muse_glimmer()
    trace = ladder.route_trace(g, [0, 2047, 4000], layers=[0, 3], strict=False, disable_vec=False)
    assert [(e["position"], e["layer"]) for e in trace] == [(0, 0), (0, 3), (2047, 0), (2047, 3), (4000, 0), (4000, 3)]
    by = {(e["position"], e["layer"]): e for e in trace}
    # Worked out by hand from the SPEC: layer 0 is SWA (a 2048-row ring, window 2048), layer 3
    # NoPE (a growing plane from 4096 rows, max context 131072). After position p's append:
    # ring len = min(p + 1, 2048), origin_logical = p + 1 - len, origin_physical = that mod 2048;
    # blocks = ceil(visible / 32), nwg = min(blocks, 32), nsg doubles while 2*nwg*nsg*32 < visible.
    expected = {
        # (position, layer): (class, route, (capacity, len, origin_logical, origin_physical), visible, schedule)
        (0, 0): ("swa", "splitk", (2048, 1, 0, 0), 1, (1, 1, 1)),             # len 1: ragged ring
        (0, 3): ("nope", "vec", (4096, 1, 0, 0), 1, (1, 1, 1)),               # growing: vec pads
        (2047, 0): ("swa", "vec", (2048, 2048, 0, 0), 2048, (64, 32, 1)),     # full, unwrapped
        (2047, 3): ("nope", "vec", (4096, 2048, 0, 0), 2048, (64, 32, 1)),
        (4000, 0): ("swa", "vec", (2048, 2048, 1953, 1953), 2048, (64, 32, 1)),  # full, wrapped
        (4000, 3): ("nope", "vec", (4096, 4001, 0, 0), 4001, (126, 32, 2)),   # 2048 < 4001 <= 4096
    }
    for key, (cls, route, st, visible, (blocks, nwg, nsg)) in expected.items():
        e = by[key]
        assert (e["class"], e["route"]) == (cls, route), key
        got_state = tuple(e["state"][f] for f in ("capacity", "len", "origin_logical", "origin_physical"))
        assert got_state == st, key
        assert e["visible"] == visible, key
        assert e["schedule"] == {"blocks": blocks, "nwg": nwg, "nsg": nsg}, key
    assert set(by[(0, 0)]["predicates"]) == {"has_vec", "strict", "vec_rows", "swa_vec", "stage"}
    assert by[(0, 0)]["predicates"]["vec_rows"] and not by[(0, 0)]["predicates"]["swa_vec"]
    assert len(trace[0]["line"].split()) == len(ladder.trace_header().split())


def test_route_trace_bad_arguments():
    g = ladder.Geometry.muse_glimmer()
    with pytest.raises(ladder.InvalidArgumentError, match="does not exist"):
        ladder.route_trace(g, [1], layers=[52])
    with pytest.raises(ladder.PositionError, match="max context"):
        ladder.route_trace(g, [131072])


def test_schedule_is_g6():
    assert ladder.schedule(1) == {"blocks": 1, "nwg": 1, "nsg": 1}
    assert ladder.schedule(2048) == {"blocks": 64, "nwg": 32, "nsg": 1}
    assert ladder.schedule(2049) == {"blocks": 65, "nwg": 32, "nsg": 2}
    assert ladder.schedule(131072) == {"blocks": 4096, "nwg": 32, "nsg": 4}
