"""Hostile arguments raise the module's typed errors (never TypeError, never a crash) and leave
the plane untouched: integers of 2**31 and above, byte-swapped, read-only, strided or reversed
arrays, objects that are not arrays at all, and configurations whose byte size overflows."""
import numpy as np
import pytest

import ladder
from helpers import random_rows

HUGE_INTS = [2**31, 2**31 + 7, 2**40, 2**63, 2**70, -(2**31) - 1]


def ring_plane(window=64, n_kv=2, head_dim=32):
    return ladder.Plane(ladder.PlaneConfig("ring", n_kv_heads=n_kv, head_dim=head_dim, capacity=window,
                                           max_context=1 << 20, window=window))


@pytest.fixture
def ready(rng):
    """A ring plane holding positions 0..40 (40 taken by append, its row not yet written) and
    the arrays a call at position 40 needs."""
    plane = ring_plane()
    for pos in range(40):
        plane.append_row(pos, *random_rows(rng, 2, 32))
    slot = plane.append(40)
    k, v = random_rows(rng, 2, 32)
    q = rng.standard_normal((8, 32)).astype(np.float32)
    return plane, slot, q, k, v


def snapshot(plane):
    return plane.state, plane.keys().view(np.uint16).copy(), plane.values().view(np.uint16).copy()


def assert_untouched(plane, before):
    state, keys, values = before
    assert plane.state == state
    np.testing.assert_array_equal(plane.keys().view(np.uint16), keys)
    np.testing.assert_array_equal(plane.values().view(np.uint16), values)


@pytest.mark.parametrize("value", HUGE_INTS)
def test_positions_and_slots_past_32_bits_raise_position_error(ready, value):
    plane, slot, q, k, v = ready
    before = snapshot(plane)
    calls = [
        lambda: plane.append(value),
        lambda: plane.append_row(value, k, v),
        lambda: plane.write_row(value, k, v),
        lambda: ladder.attend("splitk", plane, value, slot, q, k, v),
        lambda: ladder.attend("splitk", plane, 40, value, q, k, v),
        lambda: plane.state.physical(value),
        lambda: ladder.Geometry.muse_glimmer().visible("swa", value),
        lambda: ladder.route_trace(ladder.Geometry.muse_glimmer(), [0, value]),
    ]
    for call in calls:
        with pytest.raises(ladder.PositionError, match=str(value)):
            call()
    assert_untouched(plane, before)


@pytest.mark.parametrize("value", HUGE_INTS)
def test_sizes_past_32_bits_raise_invalid_argument(value):
    g = ladder.Geometry.muse_glimmer()
    calls = [
        lambda: ladder.Geometry(n_layers=value, n_heads=4, n_kv_heads=2, head_dim=32, window=8, max_context=64),
        lambda: ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=32, capacity=value, max_context=64),
        lambda: ladder.PlaneState(capacity=value, len=0),
        lambda: setattr(g, "max_context", value),
        lambda: g.layer_class(value),
        lambda: ladder.schedule(value),
        lambda: ladder.Plane.for_layer(g, "nope", initial_growing_capacity=value),
        lambda: ladder.route_trace(g, [0], layers=[value]),
    ]
    for call in calls:
        with pytest.raises(ladder.InvalidArgumentError, match=str(value)):
            call()
    assert g.max_context == 131072  # the refused assignment changed nothing


def test_numpy_integers_are_accepted_and_non_integers_refused(ready):
    plane, slot, q, k, v = ready
    out = ladder.attend("splitk", plane, np.int64(40), np.int32(slot), q, k, v)
    assert np.isfinite(out).all()
    for bad in (40.0, "40", None, True):
        with pytest.raises(ladder.InvalidArgumentError, match="position must be an integer"):
            plane.append(bad)


def test_byte_swapped_arrays_raise_dtype_error(ready):
    plane, slot, q, k, v = ready
    before = snapshot(plane)
    swapped = {name: a.astype(a.dtype.newbyteorder(">")) for name, a in (("q", q), ("k", k), ("v", v))}
    for name in ("q", "k", "v"):
        args = {"q": q, "k": k, "v": v, name: swapped[name]}
        with pytest.raises(ladder.DTypeError, match=f"{name} is byte-swapped"):
            ladder.attend("splitk", plane, 40, slot, args["q"], args["k"], args["v"])
    with pytest.raises(ladder.DTypeError, match="out is byte-swapped"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, out=np.empty((8, 32), dtype=">f4"))
    with pytest.raises(ladder.DTypeError, match="k is byte-swapped"):
        plane.write_row(slot, swapped["k"], v)
    with pytest.raises(ladder.DTypeError, match="v is byte-swapped"):
        plane.extend(k[None], swapped["v"][None])
    assert_untouched(plane, before)


def test_read_only_output_raises_invalid_argument(ready):
    plane, slot, q, k, v = ready
    before = snapshot(plane)
    out = np.full((8, 32), np.nan, dtype=np.float32)
    out.setflags(write=False)
    with pytest.raises(ladder.InvalidArgumentError, match="out is read-only"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, out=out)
    assert np.isnan(out).all()
    assert_untouched(plane, before)


@pytest.mark.parametrize("layout", ["transposed", "every-other-row", "reversed", "fortran"])
def test_non_contiguous_arrays_raise_shape_error(ready, rng, layout):
    plane, slot, q, k, v = ready
    before = snapshot(plane)
    if layout == "transposed":
        bad_q = np.ascontiguousarray(q.T).T
    elif layout == "every-other-row":
        bad_q = np.repeat(q, 2, axis=0)[::2]
    elif layout == "reversed":
        bad_q = np.ascontiguousarray(q[::-1])[::-1]
    else:
        bad_q = np.asfortranarray(q)
    assert bad_q.shape == q.shape and not bad_q.flags.c_contiguous
    with pytest.raises(ladder.ShapeError, match="q must be C-contiguous"):
        ladder.attend("splitk", plane, 40, slot, bad_q, k, v)
    out = np.empty((16, 32), dtype=np.float32)[::2]
    with pytest.raises(ladder.ShapeError, match="out must be C-contiguous"):
        ladder.attend("splitk", plane, 40, slot, q, k, v, out=out)
    assert_untouched(plane, before)


def test_objects_that_are_not_arrays_raise_invalid_argument(ready):
    plane, slot, q, k, v = ready
    for bad in ([[0.5] * 32] * 2, "k", None, object()):
        with pytest.raises(ladder.InvalidArgumentError, match="k must be a float32 array"):
            ladder.attend("splitk", plane, 40, slot, q, bad, v)
        with pytest.raises(ladder.InvalidArgumentError, match="k must be a float32 array"):
            plane.write_row(slot, bad, v)


def test_plane_whose_bytes_overflow_64_bits_is_refused_not_created_empty():
    big = 2**31 - 1
    with pytest.raises(ladder.InvalidArgumentError, match="n_kv_heads must be in 1..4096"):
        ladder.PlaneConfig("ring", n_kv_heads=big, head_dim=big, capacity=big, max_context=big)
    with pytest.raises(ladder.InvalidArgumentError, match="head_dim must be in 1..512"):
        ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=big, capacity=8, max_context=64)
    with pytest.raises(ladder.InvalidArgumentError, match="max_context must be in 1..1073741824"):
        ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=32, capacity=8, max_context=big)


def test_window_past_max_context_sizes_the_ring_by_max_context():
    g = ladder.Geometry(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, window=131072, max_context=2048)
    assert g.ring_capacity == 2048
    plane = ladder.Plane.for_layer(g, "swa")
    assert plane.capacity == 2048
    assert plane.keys().shape == (2048, 2, 32)


def test_route_trace_at_the_largest_position_answers_at_once():
    g = ladder.Geometry(n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, window=0, max_context=1 << 30,
                        nope_period=4, nope_phase=3)
    last = (1 << 30) - 1
    trace = ladder.route_trace(g, [last])
    assert [e["position"] for e in trace] == [last] * 4
    # After 2**30 appends every plane holds every token: len 2**30, origins 0.
    assert all(e["state"]["len"] == 1 << 30 and e["state"]["origin_logical"] == 0 for e in trace)
