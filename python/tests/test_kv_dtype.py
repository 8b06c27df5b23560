"""bf16 KV planes through the Python module (CPU): the kv_dtype of Geometry, PlaneConfig, Plane and
ModelCache; every route on bf16 planes against the f64 reference of the bf16-rounded rows; the
stored bits against an independent numpy rounding; bad dtype names refused."""
import numpy as np
import pytest

import ladder
from helpers import random_rows, reference, rel_err
from test_attend import TOLERANCE, growing_cfg, ring_cfg


def bf16_bits(x):
    """Round to nearest even bfloat16, as uint16 bits: the dropped half-word rounds up when above
    0x8000, or at 0x8000 when the kept word is odd (inputs here are finite, far from overflow)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_round(x):
    """The value a bf16 plane stores for x, as f64 (exact)."""
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_geometry_and_config_carry_the_dtype():
    g = ladder.Geometry.muse_glimmer()
    assert g.kv_dtype == "f16"  # the default
    b = g.with_kv_dtype("bf16")
    assert b.kv_dtype == "bf16" and g.kv_dtype == "f16"  # a copy
    assert b.kv_bytes_per_token_layer == g.kv_bytes_per_token_layer == 2 * 2 * 128 * 2
    assert "kv_dtype='bf16'" in repr(b) and "KV bf16" in b.describe()
    for cls in ("swa", "nope"):
        assert b.plane_config(cls).kv_dtype == "bf16"
        assert ladder.Plane.for_layer(b, cls).kv_dtype == "bf16"
    g2 = ladder.Geometry(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, window=16, max_context=64,
                         kv_dtype="bf16")
    assert g2.kv_dtype == "bf16"
    g2.kv_dtype = "f16"
    assert g2.kv_dtype == "f16"
    cfg = ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=32, capacity=16, max_context=64, window=16,
                             kv_dtype="bf16")
    assert cfg.kv_dtype == "bf16" and "kv_dtype='bf16'" in repr(cfg)


@pytest.mark.parametrize("bad", ["", "fp16", "BF16", "bfloat16", "f32"])
def test_bad_dtype_names_are_refused(bad):
    with pytest.raises(ladder.InvalidArgumentError, match="use f16 \\(the default\\) or bf16"):
        ladder.Geometry(n_layers=1, n_heads=2, n_kv_heads=1, head_dim=32, window=8, max_context=64, kv_dtype=bad)
    with pytest.raises(ladder.InvalidArgumentError, match="or bf16"):
        ladder.PlaneConfig("growing", n_kv_heads=1, head_dim=32, capacity=8, max_context=64, kv_dtype=bad)
    g = ladder.Geometry.muse_glimmer()
    with pytest.raises(ladder.InvalidArgumentError):
        g.kv_dtype = bad
    assert g.kv_dtype == "f16"  # untouched
    with pytest.raises(ladder.InvalidArgumentError):
        ladder.ModelCache(g, kv_dtype=bad)


def bf16_cfg(cfg):
    """The same plane configuration with bf16 elements."""
    kw = dict(n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, capacity=cfg.capacity, max_context=cfg.max_context,
              kv_dtype="bf16")
    if cfg.kind == "ring":
        kw["window"] = cfg.window
    return ladder.PlaneConfig(cfg.kind, **kw)


CASES = [
    ("splitk-ring-partially-wrapped", ring_cfg(64, slack=9), 100, "splitk"),
    ("splitk-growing", growing_cfg(), 77, "splitk"),
    ("vec-ring-wrapped-full", ring_cfg(64), 130, "vec"),
    ("vec-growing-ragged-tail", growing_cfg(), 70, "vec"),
    ("interleaved-growing-ragged", growing_cfg(), 100, "interleaved"),
    ("interleaved-growing-capacity-below-32", growing_cfg(capacity=8), 5, "interleaved"),
    ("staged-ring-wrapped", ring_cfg(64), 99, "staged"),
    ("staged-ring-partially-wrapped", ring_cfg(64, slack=5), 80, "staged"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_route_on_bf16_planes(rng, case):
    _, f16_cfg, position, route = case
    cfg = bf16_cfg(f16_cfg)
    plane = ladder.Plane(cfg)
    n_kv, d = cfg.n_kv_heads, cfg.head_dim
    k_hist, v_hist = [], []
    for pos in range(position):
        k, v = random_rows(rng, n_kv, d)
        plane.append_row(pos, k, v)
        k_hist.append(bf16_round(k))
        v_hist.append(bf16_round(v))
    k, v = random_rows(rng, n_kv, d)
    q = rng.standard_normal((32, d)).astype(np.float32)
    slot = plane.append(position)
    out = np.full((32, d), np.nan, dtype=np.float32)  # poisoned
    ladder.attend(route, plane, position, slot, q, k, v, out=out)
    # The stored row: the bf16 rounding of k and v (keys() widens bf16 to float32 exactly).
    keys, values = plane.keys(), plane.values()
    assert keys.dtype == np.float32
    stored_k = keys[slot] if cfg.kind == "ring" else keys[:, slot]
    stored_v = values[slot] if cfg.kind == "ring" else values[:, slot]
    np.testing.assert_array_equal(bf16_bits(stored_k), bf16_bits(k))
    np.testing.assert_array_equal(bf16_bits(stored_v), bf16_bits(v))
    np.testing.assert_array_equal(stored_k.astype(np.float64), bf16_round(k))
    # The reference of the stored elements (the interleaved route reads this token unrounded).
    cur_k, cur_v = (k.astype(np.float64), v.astype(np.float64)) if route == "interleaved" else (bf16_round(k),
                                                                                                   bf16_round(v))
    visible = min(position + 1, cfg.window) if cfg.kind == "ring" and cfg.window > 0 else position + 1
    first = position + 1 - visible
    k_rows = np.stack(k_hist[first:position] + [cur_k])
    v_rows = np.stack(v_hist[first:position] + [cur_v])
    assert np.isfinite(out).all()
    assert rel_err(out, reference(q, k_rows, v_rows)) < TOLERANCE
    # window_rows reads the stored bf16 values too.
    wk, wv = plane.window_rows()
    np.testing.assert_array_equal(wk[:-1].astype(np.float64), k_rows[:-1])


def test_unwritten_bf16_rows_read_as_nan():
    plane = ladder.Plane(ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=32, capacity=8, max_context=64,
                                            kv_dtype="bf16"))
    assert np.isnan(plane.keys()).all() and np.isnan(plane.values()).all()


def test_model_cache_with_bf16_planes(rng):
    g = ladder.Geometry(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, window=16, max_context=256,
                        layer_classes=["swa", "nope"])
    cache = ladder.ModelCache(g, kv_dtype="bf16")
    assert cache.geometry.kv_dtype == "bf16" and g.kv_dtype == "f16"
    seqs = [cache.add_sequence() for _ in range(2)]
    hist = {(s, l): ([], []) for s in seqs for l in range(2)}
    for step in range(40):
        for layer in range(2):
            q = rng.standard_normal((2, 4, 32)).astype(np.float32)
            k = rng.standard_normal((2, 2, 32)).astype(np.float32)
            v = rng.standard_normal((2, 2, 32)).astype(np.float32)
            out = np.asarray(cache.decode(layer, q, k, v), dtype=np.float64)
            for i, s in enumerate(seqs):
                ks, vs = hist[(s, layer)]
                ks.append(bf16_round(k[i]))
                vs.append(bf16_round(v[i]))
                visible = len(ks) if layer == 1 else min(len(ks), 16)
                ref = reference(q[i], np.stack(ks[-visible:]), np.stack(vs[-visible:]))
                assert rel_err(out[i], ref) < TOLERANCE, (step, layer, s)
                if step == 0:
                    # One token held: each head's output is its KV head's stored v row, so the
                    # planes' rounding shows: bf16's 8-bit mantissa, not f16's 11.
                    kv_head = np.arange(4) // 2
                    np.testing.assert_allclose(out[i], bf16_round(v[i])[kv_head], rtol=1e-6)
    assert [cache.length(s, layer) for s in seqs for layer in range(2)] == [40] * 4
