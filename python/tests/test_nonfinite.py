"""N1 through the Python module (docs/nonfinite.md): a NaN, +-Inf or a finite value beyond f16's
65504 in q, in the current K or V row or in an older row, on every route that applies; each
output element's NaN-ness against the policy's prediction and the f64 numpy reference of the
ruled inputs, finite values within P3's bound, and the plane's range counters."""
import numpy as np
import pytest

import ladder
from helpers import random_rows, reference

TOLERANCE = 2e-3  # P3, as in test_attend.py
F16_MAX = 65504.0
POISONS = [np.nan, np.inf, -np.inf, 7e4, -7e4]


def ruled(x):
    """The range rule: NaN stays NaN, +-Inf becomes NaN, finite values saturate at +-65504."""
    x = np.asarray(x, dtype=np.float64)
    out = np.clip(x, -F16_MAX, F16_MAX)
    out[np.isinf(x)] = np.nan
    return out


def stored(x):
    """What a plane holds for f32 activations x: the rule, then f16 rounding."""
    return ruled(x).astype(np.float16).astype(np.float64)


def ring_cfg():
    return ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=128, capacity=80, max_context=1 << 20, window=64)


def growing_cfg():
    return ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=128, capacity=16, max_context=1 << 20)


# (config, position attended at, routes): a partially wrapped ring, a full contiguous ring, a
# growing plane with a ragged tail.
CASES = [
    ("ring-partially-wrapped", ring_cfg, 70, ["splitk", "staged"]),
    ("ring-full", ring_cfg, 63, ["vec", "splitk", "staged"]),
    ("growing-ragged", growing_cfg, 40, ["vec", "splitk", "interleaved"]),
]
SITES = ["q", "k", "v", "old k", "old v"]
OLD_POSITION = 30  # visible at every position in CASES


def counts(value):
    value = np.float32(value)
    return {"saturated": int(np.isfinite(value) and abs(value) > F16_MAX), "nonfinite": int(not np.isfinite(value))}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("value", POISONS, ids=["nan", "+inf", "-inf", "+7e4", "-7e4"])
def test_poison_follows_the_policy(rng, case, site, value):
    _, make_cfg, position, routes = case
    n_heads = 8
    for route in routes:
        plane = ladder.Plane(make_cfg())
        cfg = plane.config
        k_hist, v_hist = [], []
        which = rng.integers(0, n_heads * 128 if site == "q" else 2 * 128)
        for pos in range(position):
            k, v = random_rows(rng, 2, 128)
            if pos == OLD_POSITION and site.startswith("old"):
                (k if site == "old k" else v).reshape(-1)[which] = value
            plane.append_row(pos, k, v)
            k_hist.append(stored(k))
            v_hist.append(stored(v))
        q = rng.standard_normal((n_heads, 128)).astype(np.float32)
        k, v = random_rows(rng, 2, 128)
        if site in ("q", "k", "v"):
            {"q": q, "k": k, "v": v}[site].reshape(-1)[which] = value
        before = plane.range_stats
        slot = plane.append(position)
        out = np.full((n_heads, 128), np.nan, dtype=np.float32)
        ladder.attend(route, plane, position, slot, q, k, v, out)
        after = plane.range_stats
        call = {key: after[key] - before[key] for key in after}
        assert call == (counts(value) if site in ("q", "k", "v") else {"saturated": 0, "nonfinite": 0})

        visible = min(position + 1, cfg.window) if cfg.window > 0 else position + 1
        first = position + 1 - visible
        cur_k = ruled(k) if route == "interleaved" else stored(k)
        cur_v = ruled(v) if route == "interleaved" else stored(v)
        ks = np.stack(k_hist[first:position] + [cur_k])
        vs = np.stack(v_hist[first:position] + [cur_v])
        with np.errstate(invalid="ignore"):
            ref = reference(ruled(q), ks, vs)

        # The policy's own prediction, element by element.
        expect = np.zeros((n_heads, 128), dtype=bool)
        if np.isnan(ruled(np.array([value]))[0]):
            group = n_heads // 2
            if site == "q":
                expect[which // 128] = True
            elif site.endswith("k"):
                expect[(which // 128) * group:(which // 128 + 1) * group] = True
            else:
                expect[(which // 128) * group:(which // 128 + 1) * group, which % 128] = True
        assert not np.isinf(out).any()
        np.testing.assert_array_equal(np.isnan(ref), expect)
        np.testing.assert_array_equal(np.isnan(out), expect, err_msg=f"route {route}")
        finite = ~expect
        err = np.linalg.norm(out[finite] - ref[finite]) / np.linalg.norm(ref[finite])
        assert err < TOLERANCE, f"route {route}: {err}"


def test_write_row_saturates_and_counts():
    plane = ladder.Plane(growing_cfg())
    k = np.full((2, 128), 0.5, dtype=np.float32)
    v = np.full((2, 128), -0.25, dtype=np.float32)
    k[0, 3], k[1, 0], v[1, 127] = 7e4, np.inf, np.nan
    plane.append_row(0, k, v)
    assert plane.range_stats == {"saturated": 1, "nonfinite": 2}
    keys = plane.keys()
    assert keys[0, 0, 3] == np.float16(F16_MAX)  # growing planes are (n_kv, capacity, head_dim)
    assert np.isnan(keys[1, 0, 0])  # Inf is stored as NaN
    assert np.isnan(plane.values()[1, 0, 127])
