"""Every route on the CPU against the f64 numpy reference (P3), over wrap states, odd lengths,
capacities around 32 and several GQA ratios; then the errors ladder.attend raises."""
import numpy as np
import pytest

import ladder
from helpers import Filled, f16_round, random_rows, reference, rel_err

TOLERANCE = 2e-3  # P3: f16 KV on random inputs


def ring_cfg(window, slack=0, n_kv=2, head_dim=128):
    return ladder.PlaneConfig("ring", n_kv_heads=n_kv, head_dim=head_dim, capacity=window + slack,
                              max_context=1 << 20, window=window)


def growing_cfg(capacity=64, n_kv=2, head_dim=128):
    return ladder.PlaneConfig("growing", n_kv_heads=n_kv, head_dim=head_dim, capacity=capacity,
                              max_context=1 << 20)


# (id, config, position attended at, route, n_heads). Each position is chosen so the plane is
# in the state named by the id after the append.
CASES = [
    ("splitk-ring-first-token", ring_cfg(64), 0, "splitk", 32),
    ("splitk-ring-ragged", ring_cfg(64), 40, "splitk", 32),
    ("splitk-ring-partially-wrapped", ring_cfg(64, slack=9), 100, "splitk", 32),
    ("splitk-ring-full-wrapped", ring_cfg(64), 150, "splitk", 32),
    ("splitk-ring-capacity-below-32", ring_cfg(16), 37, "splitk", 32),
    ("splitk-growing", growing_cfg(), 77, "splitk", 32),
    ("vec-ring-unwrapped-full", ring_cfg(64), 63, "vec", 32),
    ("vec-ring-wrapped-full", ring_cfg(64), 130, "vec", 32),
    ("vec-ring-len-32", ring_cfg(96), 31, "vec", 32),
    ("vec-growing-ragged-tail", growing_cfg(), 70, "vec", 32),
    ("vec-growing-one-block", growing_cfg(), 31, "vec", 32),
    ("vec-growing-first-token", growing_cfg(), 0, "vec", 32),
    ("interleaved-growing-first-token", growing_cfg(), 0, "interleaved", 32),
    ("interleaved-growing-ragged", growing_cfg(), 100, "interleaved", 32),
    ("interleaved-growing-capacity-below-32", growing_cfg(capacity=8), 5, "interleaved", 32),
    ("staged-ring-wrapped", ring_cfg(64), 99, "staged", 32),
    ("staged-ring-partially-wrapped", ring_cfg(64, slack=5), 80, "staged", 32),
    ("staged-ring-unwrapped-ragged", ring_cfg(64), 44, "staged", 32),
    ("splitk-gqa-12-4-d64", ring_cfg(48, slack=3, n_kv=4, head_dim=64), 90, "splitk", 12),
    ("vec-gqa-8-8-d64", growing_cfg(n_kv=8, head_dim=64), 45, "vec", 8),
    ("interleaved-gqa-6-1-d32", growing_cfg(n_kv=1, head_dim=32), 33, "interleaved", 6),
    ("staged-gqa-4-2-d64", ring_cfg(40, slack=2, n_kv=2, head_dim=64), 70, "staged", 4),
]


def slot_rows(plane, slot):
    """The f16 K and V rows stored at a physical slot, (n_kv_heads, head_dim) each, as raw bits."""
    keys, values = plane.keys().view(np.uint16), plane.values().view(np.uint16)
    if plane.kind == "ring":  # token-major (capacity, n_kv_heads, head_dim)
        return keys[slot].copy(), values[slot].copy()
    return keys[:, slot].copy(), values[:, slot].copy()  # head-major (n_kv_heads, capacity, head_dim)


def run_case(rng, cfg, position, route, n_heads):
    plane = ladder.Plane(cfg)
    filled = Filled(plane, rng, position)
    k, v = random_rows(rng, cfg.n_kv_heads, cfg.head_dim)
    q = rng.standard_normal((n_heads, cfg.head_dim)).astype(np.float32)
    slot = plane.append(position)
    before = slot_rows(plane, slot)
    out = np.full((n_heads, cfg.head_dim), np.nan, dtype=np.float32)  # poisoned: every element must be written
    got = ladder.attend(route, plane, position, slot, q, k, v, out=out)
    # The route stores this token's row itself (fused into the producer on interleaved): the slot
    # held poison or an evicted token's row before the call, and holds k, v rounded to f16 after.
    after = slot_rows(plane, slot)
    k16, v16 = k.astype(np.float16).view(np.uint16), v.astype(np.float16).view(np.uint16)
    assert not np.array_equal(before[0], k16) and not np.array_equal(before[1], v16)
    np.testing.assert_array_equal(after[0], k16)
    np.testing.assert_array_equal(after[1], v16)
    # The interleaved route reads this token from the f32 activations (current-token bypass);
    # every other route reads it back from the f16 plane.
    cur_k, cur_v = (k.astype(np.float64), v.astype(np.float64)) if route == "interleaved" else (f16_round(k), f16_round(v))
    k_rows, v_rows = filled.window(position, cur_k, cur_v)
    return plane, got, out, reference(q, k_rows, v_rows), (q, k, v), slot


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_route_matches_f64_reference(rng, case):
    _, cfg, position, route, n_heads = case
    plane, got, out, ref, _, slot = run_case(rng, cfg, position, route, n_heads)
    assert got is out  # written in place
    assert np.isfinite(out).all()
    assert rel_err(out, ref) < TOLERANCE


@pytest.mark.parametrize("route", ["splitk", "vec", "staged"])
def test_bit_reproducible(rng, route):
    """P1: the same inputs give the same bits, run after run."""
    cfg = ring_cfg(64)
    position = 95
    seed = rng.integers(1 << 30)
    outs = []
    for _ in range(3):
        r = np.random.default_rng(seed)
        _, _, out, _, _, _ = run_case(r, cfg, position, route, 32)
        outs.append(out.view(np.uint32).copy())
    assert all((o == outs[0]).all() for o in outs)


def test_auto_takes_the_ladders_route(rng):
    cfg = ring_cfg(64, slack=9)
    plane = ladder.Plane(cfg)
    filled = Filled(plane, rng, 100)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    slot = plane.append(100)
    assert ladder.choose_route("swa", plane.state, strict=False, disable_vec=False)[0] == "splitk"
    out = ladder.attend("auto", plane, 100, slot, q, k, v)
    assert out.shape == (32, 128) and out.dtype == np.float32
    k_rows, v_rows = filled.window(100, f16_round(k), f16_round(v))
    assert rel_err(out, reference(q, k_rows, v_rows)) < TOLERANCE


def test_splitk_on_a_wrapped_ring_equals_vec_unwrapped(rng):
    """P6: splitk reduces in logical token order, so a wrapped ring gives the bits vec gives over
    the same rows stored unwrapped."""
    window = 64
    wrapped = ladder.Plane(ring_cfg(window))
    rows = [random_rows(rng, 2, 128) for _ in range(window + 37)]
    for pos, (k, v) in enumerate(rows[:-1]):
        wrapped.append_row(pos, k, v)
    unwrapped = ladder.Plane(ring_cfg(window))
    for pos, (k, v) in enumerate(rows[-window:-1]):
        unwrapped.append_row(pos, k, v)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    k, v = rows[-1]
    last_w = len(rows) - 1
    out_w = ladder.attend("splitk", wrapped, last_w, wrapped.append(last_w), q, k, v)
    assert wrapped.origin_physical != 0
    out_u = ladder.attend("vec", unwrapped, window - 1, unwrapped.append(window - 1), q, k, v)
    assert unwrapped.origin_physical == 0
    np.testing.assert_array_equal(out_w.view(np.uint32), out_u.view(np.uint32))


@pytest.mark.parametrize("origin", [1, 31, 32, 63])
def test_vec_on_a_full_wrapped_ring_equals_splitk_and_vec_unwrapped(rng, origin):
    """P7: vec reads a full wrapped ring as two spans in logical order (oldest token first), so it
    gives the bits of splitk on that ring and of vec over the same rows stored unwrapped, wherever
    the window starts (a 32-token block straddles the ring's end unless origin is 0 or 32)."""
    window = 64
    rows = [random_rows(rng, 2, 128) for _ in range(window + origin)]
    q = rng.standard_normal((32, 128)).astype(np.float32)
    k, v = rows[-1]
    last = len(rows) - 1
    outs = {}
    for route in ("vec", "splitk"):
        wrapped = ladder.Plane(ring_cfg(window))
        for pos, (kr, vr) in enumerate(rows[:-1]):
            wrapped.append_row(pos, kr, vr)
        out = np.full((32, 128), np.nan, dtype=np.float32)  # poisoned: every element must be written
        ladder.attend(route, wrapped, last, wrapped.append(last), q, k, v, out=out)
        assert wrapped.origin_physical == origin and wrapped.len == window
        outs[route] = out
    unwrapped = ladder.Plane(ring_cfg(window))
    for pos, (kr, vr) in enumerate(rows[-window:-1]):
        unwrapped.append_row(pos, kr, vr)
    out_u = np.full((32, 128), np.nan, dtype=np.float32)
    ladder.attend("vec", unwrapped, window - 1, unwrapped.append(window - 1), q, k, v, out=out_u)
    assert unwrapped.origin_physical == 0
    np.testing.assert_array_equal(outs["vec"].view(np.uint32), outs["splitk"].view(np.uint32))
    np.testing.assert_array_equal(outs["vec"].view(np.uint32), out_u.view(np.uint32))
    # The planes hold every row rounded to f16, the current one included.
    k_rows = np.stack([f16_round(r[0]) for r in rows[-window:]])
    v_rows = np.stack([f16_round(r[1]) for r in rows[-window:]])
    assert rel_err(outs["vec"], reference(q, k_rows, v_rows)) < TOLERANCE


# ---- errors -------------------------------------------------------------------------------------

@pytest.fixture
def ready(rng):
    """A ring plane that took position 40's append, and valid arrays for it."""
    plane = ladder.Plane(ring_cfg(64))
    Filled(plane, rng, 40)
    slot = plane.append(40)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    return plane, slot, q, k, v


def test_bad_q_shape_names_the_expected_shape(ready):
    plane, slot, q, k, v = ready
    with pytest.raises(ladder.ShapeError, match=r"\(n_heads, 128\) = \(n_heads, head_dim\).*multiple of n_kv_heads \(2\), got \(32, 64\)"):
        ladder.attend("splitk", plane, 40, slot, q[:, :64].copy(), k, v)
    with pytest.raises(ladder.ShapeError, match=r"got \(31, 128\)"):
        ladder.attend("splitk", plane, 40, slot, q[:31].copy(), k, v)
    with pytest.raises(ValueError, match=r"got \(4096,\)"):
        ladder.attend("splitk", plane, 40, slot, q.reshape(-1), k, v)


def test_bad_kv_and_out(ready):
    plane, slot, q, k, v = ready
    with pytest.raises(ladder.ShapeError, match=r"k must have shape \(2, 128\) = \(n_kv_heads, head_dim\), got \(1, 128\)"):
        ladder.attend("splitk", plane, 40, slot, q, k[:1].copy(), v)
    with pytest.raises(ladder.DTypeError, match="v must be float32, float16 or bfloat16.*got float64"):
        ladder.attend("splitk", plane, 40, slot, q, k, v.astype(np.float64))
    with pytest.raises(ladder.ShapeError, match=r"out must have shape \(32, 128\) = \(n_heads, head_dim\)"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, out=np.empty((16, 128), np.float32))
    with pytest.raises(ladder.ShapeError, match="C-contiguous"):
        ladder.attend("splitk", plane, 40, slot, np.asfortranarray(q), k, v)
    with pytest.raises(ladder.DTypeError, match="float32"):
        ladder.attend("splitk", plane, 40, slot, q.astype(np.float64), k, v)


def test_read_only_inputs_are_accepted(ready):
    plane, slot, q, k, v = ready
    for a in (q, k, v):
        a.setflags(write=False)
    ladder.attend("splitk", plane, 40, slot, q, k, v)


def test_bad_position_and_slot(ready):
    plane, slot, q, k, v = ready
    with pytest.raises(ladder.PositionError, match="last append was position 40"):
        ladder.attend("splitk", plane, 41, slot, q, k, v)
    with pytest.raises(ladder.PositionError, match="not where position 40 lives"):
        ladder.attend("splitk", plane, 40, slot + 1, q, k, v)


def test_route_refusals(rng):
    partially = ladder.Plane(ring_cfg(64, slack=9))
    Filled(partially, rng, 100)
    slot = partially.append(100)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    with pytest.raises(ladder.RouteError, match="partially wrapped"):
        ladder.attend("vec", partially, 100, slot, q, k, v)
    with pytest.raises(ladder.RouteError, match="growing"):
        ladder.attend("interleaved", partially, 100, slot, q, k, v)
    with pytest.raises(ValueError, match="'vec', 'splitk', 'interleaved', 'staged' or 'auto'"):
        ladder.attend("flash", partially, 100, slot, q, k, v)
    assert ladder.route_refusal("splitk", partially) == ""
    ragged = ladder.Plane(ring_cfg(64))
    Filled(ragged, rng, 40)
    slot = ragged.append(40)
    with pytest.raises(ladder.RouteError, match="len % 32"):
        ladder.attend("vec", ragged, 40, slot, q, k, v)
    tiny = ladder.Plane(growing_cfg(capacity=8))
    Filled(tiny, rng, 5)
    slot = tiny.append(5)
    with pytest.raises(ladder.RouteError, match="capacity < 32"):
        ladder.attend("vec", tiny, 5, slot, q, k, v)
    with pytest.raises(ladder.RouteError, match="never wraps"):
        ladder.attend("staged", tiny, 5, slot, q, k, v)


def test_bad_device_argument(ready):
    plane, slot, q, k, v = ready
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, device="mps")


@pytest.mark.skipif(ladder.has_cuda_build(), reason="this build has CUDA")
def test_cuda_without_cuda_build(ready):
    plane, slot, q, k, v = ready
    with pytest.raises(ladder.NoDeviceError, match="no CUDA"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, device="cuda")
