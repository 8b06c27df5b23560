import numpy as np
import pytest

import ladder
from helpers import f16_round, random_rows


def ring(window=64, slack=0, n_kv_heads=2, head_dim=128, max_context=100000):
    cfg = ladder.PlaneConfig("ring", n_kv_heads=n_kv_heads, head_dim=head_dim, capacity=window + slack,
                             max_context=max_context, window=window)
    return ladder.Plane(cfg)


def test_ring_append_follows_k1():
    p = ring(window=8, slack=3)
    for pos in range(40):
        slot = p.append(pos)
        st = p.state
        assert st.len == min(pos + 1, 8)
        assert slot == st.physical(pos)
        # physical(logical) = (origin_physical + logical - origin_logical) mod capacity
        assert slot == (st.origin_physical + pos - st.origin_logical) % st.capacity
        assert st.origin_logical == pos + 1 - st.len
    assert p.capacity == 11 and p.next_position == 40


def test_partially_wrapped_state_occurs_with_slack():
    p = ring(window=8, slack=3)
    seen = set()
    for pos in range(30):
        p.append(pos)
        seen.add(p.state.partially_wrapped)
    assert seen == {False, True}


def test_refused_appends_leave_plane_untouched():
    p = ring(window=8, max_context=10)
    for pos in range(5):
        p.append(pos)
    before = p.state
    with pytest.raises(ladder.PositionError, match="expects position 5"):
        p.append(7)
    with pytest.raises(ladder.PositionError):
        p.append(4)  # repeated
    assert p.state == before
    for pos in range(5, 10):
        p.append(pos)
    with pytest.raises(ladder.PositionError, match="max context"):
        p.append(10)
    assert p.next_position == 10


def test_rows_land_where_the_accessor_says(rng):
    p = ring(window=8, slack=2, n_kv_heads=2, head_dim=16)
    hist = {}
    for pos in range(23):
        k, v = random_rows(rng, 2, 16)
        slot = p.append_row(pos, k, v)
        hist[pos] = (f16_round(k), f16_round(v))
        keys = p.keys()
        assert keys.dtype == np.float16 and keys.shape == (10, 2, 16)
        np.testing.assert_array_equal(keys[slot].astype(np.float64), hist[pos][0])
        np.testing.assert_array_equal(p.values()[slot].astype(np.float64), hist[pos][1])
    k_win, v_win = p.window_rows()
    assert k_win.shape == (8, 2, 16)
    np.testing.assert_array_equal(k_win, np.stack([hist[t][0] for t in range(15, 23)]))
    np.testing.assert_array_equal(v_win, np.stack([hist[t][1] for t in range(15, 23)]))


def test_growing_plane_grows_with_data_preserved(rng):
    cfg = ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=8, capacity=4, max_context=64)
    p = ladder.Plane(cfg)
    rows = []
    for pos in range(19):
        k, v = random_rows(rng, 2, 8)
        assert p.append_row(pos, k, v) == pos  # never wraps
        rows.append(f16_round(k))
    assert p.capacity == 32 and p.len == 19 and p.origin_physical == 0
    keys = p.keys()  # head-major: (n_kv_heads, capacity, head_dim)
    assert keys.shape == (2, 32, 8)
    np.testing.assert_array_equal(keys[:, :19, :].transpose(1, 0, 2).astype(np.float64), np.stack(rows))
    assert np.isnan(keys[:, 19:, :].astype(np.float32)).all()  # unwritten rows are poisoned


def test_write_row_checks_shape_dtype_and_slot(rng):
    p = ring(window=8, n_kv_heads=2, head_dim=16)
    slot = p.append(0)
    k, v = random_rows(rng, 2, 16)
    with pytest.raises(ladder.ShapeError, match=r"\(2, 16\) = \(n_kv_heads, head_dim\)"):
        p.write_row(slot, k[:1], v)
    with pytest.raises(ladder.DTypeError, match="float32"):
        p.write_row(slot, k.astype(np.float64), v)
    with pytest.raises(ladder.ShapeError, match="C-contiguous"):
        p.write_row(slot, np.asfortranarray(k), v)
    with pytest.raises(ladder.PositionError, match="outside the plane"):
        p.write_row(8, k, v)
    p.write_row(slot, k, v)


def test_append_row_with_bad_row_leaves_plane_untouched(rng):
    p = ring(window=8, n_kv_heads=2, head_dim=16)
    k, v = random_rows(rng, 2, 16)
    with pytest.raises(ladder.ShapeError):
        p.append_row(0, k.T.copy(), v)
    assert p.len == 0 and p.next_position == 0


def test_invalid_configs():
    with pytest.raises(ladder.InvalidArgumentError, match="smaller than its window"):
        ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=16, capacity=8, max_context=100, window=16)
    with pytest.raises(ladder.InvalidArgumentError, match="'ring' or 'growing'"):
        ladder.PlaneConfig("paged", n_kv_heads=2, head_dim=16, capacity=8, max_context=100)
    with pytest.raises(ladder.InvalidArgumentError, match="'cpu' or 'cuda'"):
        ladder.Plane(ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=16, capacity=8, max_context=100),
                     device="tpu")


def test_for_layer_uses_the_geometry():
    g = ladder.Geometry.muse_glimmer()
    swa = ladder.Plane.for_layer(g, "swa")
    nope = ladder.Plane.for_layer(g, "nope", initial_growing_capacity=256)
    assert (swa.kind, swa.capacity, swa.config.window) == ("ring", 2048, 2048)
    assert (nope.kind, nope.capacity, nope.layer_class) == ("growing", 256, "nope")


@pytest.mark.skipif(ladder.has_cuda_build(), reason="this build has CUDA")
def test_device_plane_without_cuda_build_raises():
    cfg = ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=128, capacity=64, max_context=100)
    with pytest.raises(ladder.NoDeviceError, match="no CUDA support"):
        ladder.Plane(cfg, device="cuda")


def test_extend_matches_one_by_one(rng):
    a = ring(window=8, slack=3, n_kv_heads=2, head_dim=16)
    b = ring(window=8, slack=3, n_kv_heads=2, head_dim=16)
    k = rng.standard_normal((30, 2, 16)).astype(np.float32)
    v = rng.standard_normal((30, 2, 16)).astype(np.float32)
    slots = [a.append_row(i, k[i], v[i]) for i in range(30)]
    assert b.extend(k, v) == slots
    assert a.state == b.state
    np.testing.assert_array_equal(a.keys().view(np.uint16), b.keys().view(np.uint16))
    np.testing.assert_array_equal(a.values().view(np.uint16), b.values().view(np.uint16))


def test_extend_refusal_changes_nothing(rng):
    p = ring(window=8, n_kv_heads=2, head_dim=16, max_context=10)
    k = rng.standard_normal((12, 2, 16)).astype(np.float32)
    with pytest.raises(ladder.PositionError, match="max context"):
        p.extend(k, k)
    assert p.len == 0 and p.next_position == 0
    with pytest.raises(ladder.ShapeError, match=r"\(12, 2, 16\) = \(rows, n_kv_heads, head_dim\)"):
        p.extend(k, k[:, :1].copy())
