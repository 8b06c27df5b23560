"""q, k, v and out in the model's dtype (float32, float16, bfloat16; numpy and torch CPU arrays),
read in place and converted in C++: every route against the f64 reference of the values the
arrays actually hold, then the typed errors for dtypes, layouts and shapes that cannot be read."""
import numpy as np
import pytest

import ladder
from helpers import Filled, f16_round, reference, rel_err
from test_attend import TOLERANCE, growing_cfg, ring_cfg

torch = pytest.importorskip("torch", reason="torch is not importable: the torch tensor tests need it")

# Relative rounding of a result stored in each dtype (half an ulp at 1.0, round to nearest even):
# an output in float16 or bfloat16 may differ from the float32 result by this much per element.
OUT_ROUNDING = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-8}

# One plane state per route the ladder has (ids as in test_attend.CASES).
ROUTE_CASES = [
    ("splitk-ring-partially-wrapped", ring_cfg(64, slack=9), 100, "splitk"),
    ("vec-ring-wrapped-full", ring_cfg(64), 130, "vec"),
    ("vec-growing-ragged-tail", growing_cfg(), 70, "vec"),
    ("interleaved-growing-ragged", growing_cfg(), 100, "interleaved"),
    ("staged-ring-wrapped", ring_cfg(64), 99, "staged"),
    ("auto-ring-partially-wrapped", ring_cfg(64, slack=9), 100, "auto"),
]

# (library, q dtype, k/v dtype, out dtype): mixed dtypes in one call are allowed.
DTYPE_CASES = [
    ("torch", "float32", "float32", "float32"),
    ("torch", "float16", "float16", "float16"),
    ("torch", "bfloat16", "bfloat16", "bfloat16"),
    ("torch", "bfloat16", "float16", "float32"),
    ("numpy", "float16", "float16", "float16"),
    ("numpy", "float32", "float16", "float16"),
    # A device plane with CUDA tensors: converted on the GPU on torch's current stream.
    ("cuda", "bfloat16", "bfloat16", "bfloat16"),
    ("cuda", "float16", "float16", "float16"),
    ("cuda", "float32", "bfloat16", "float16"),
]


def cuda_ready():
    return ladder.cuda_available() and torch.cuda.is_available()


def as_array(lib, x, dtype):
    """x (float32 numpy) as an array of `lib` in `dtype`, and the float64 values it holds."""
    if lib == "numpy":
        a = x.astype(np.dtype(dtype))
        return a, a.astype(np.float64)
    t = torch.from_numpy(x).to(getattr(torch, dtype))
    values = t.double().numpy()
    return (t.cuda() if lib == "cuda" else t), values


def new_out(lib, shape, dtype):
    """A poisoned output: every element must be written."""
    if lib == "numpy":
        return np.full(shape, np.nan, dtype=np.dtype(dtype))
    return torch.full(shape, float("nan"), dtype=getattr(torch, dtype), device="cuda" if lib == "cuda" else "cpu")


def to_f64(a):
    return a.double().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)


@pytest.mark.parametrize("lib,q_dtype,kv_dtype,out_dtype", DTYPE_CASES, ids=lambda x: str(x))
@pytest.mark.parametrize("case", ROUTE_CASES, ids=[c[0] for c in ROUTE_CASES])
def test_dtypes_match_reference(rng, case, lib, q_dtype, kv_dtype, out_dtype):
    _, cfg, position, route = case
    n_heads = 32
    if lib == "cuda" and not cuda_ready():
        pytest.skip("needs a CUDA build of ladder and a GPU")
    plane = ladder.Plane(cfg, device="cuda", n_heads=n_heads) if lib == "cuda" else ladder.Plane(cfg)
    filled = Filled(plane, rng, position)
    q32 = rng.standard_normal((n_heads, cfg.head_dim)).astype(np.float32)
    k32 = rng.standard_normal((cfg.n_kv_heads, cfg.head_dim)).astype(np.float32)
    v32 = rng.standard_normal((cfg.n_kv_heads, cfg.head_dim)).astype(np.float32)
    q, q64 = as_array(lib, q32, q_dtype)
    k, k64 = as_array(lib, k32, kv_dtype)
    v, v64 = as_array(lib, v32, kv_dtype)
    out = new_out(lib, (n_heads, cfg.head_dim), out_dtype)
    slot = plane.append(position)
    got = ladder.attend(route, plane, position, slot, q, k, v, out=out)
    assert got is out
    # The interleaved route reads this token's k, v as float32 after conversion (exact from
    # float16 / bfloat16); the others read them back from the float16 plane.
    chosen = route if route != "auto" else ladder.choose_route("swa" if cfg.kind == "ring" else "nope", plane.state)[0]
    cur_k, cur_v = (k64, v64) if chosen == "interleaved" else (f16_round(k64), f16_round(v64))
    k_rows, v_rows = filled.window(position, cur_k, cur_v)
    ref = reference(q64, k_rows, v_rows)
    result = to_f64(out)
    assert np.isfinite(result).all(), "an output element was left unwritten (poison survived)"
    assert rel_err(result, ref) < TOLERANCE + OUT_ROUNDING[out_dtype]


def test_float16_out_is_the_float32_result_rounded(rng):
    """Same plane state, same inputs: a float16 out holds exactly the float32 out rounded to
    nearest even (the conversion adds nothing else)."""
    cfg = ring_cfg(64)
    q32 = rng.standard_normal((32, 128)).astype(np.float32)
    k32 = rng.standard_normal((2, 128)).astype(np.float32)
    results = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        plane = ladder.Plane(cfg)
        Filled(plane, np.random.default_rng(7), 90)
        slot = plane.append(90)
        out = torch.full((32, 128), float("nan"), dtype=dtype)
        ladder.attend("splitk", plane, 90, slot, torch.from_numpy(q32), torch.from_numpy(k32), torch.from_numpy(k32),
                      out=out)
        results[dtype] = out
    f32 = results[torch.float32]
    assert torch.equal(results[torch.float16], f32.to(torch.float16))
    assert torch.equal(results[torch.bfloat16], f32.to(torch.bfloat16))


def test_out_none_takes_q_dtype(rng):
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        plane = ladder.Plane(growing_cfg())
        Filled(plane, rng, 10)
        slot = plane.append(10)
        q = torch.randn(32, 128).to(dtype)
        kv = torch.randn(2, 128).to(dtype)
        assert ladder.attend("splitk", plane, 10, slot, q, kv, kv).dtype == dtype


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rows_in_model_dtype(rng, dtype):
    """write_row, append_row and extend take float16 / bfloat16 rows: the plane stores each value
    rounded to float16 (exact for float16; bfloat16 values are rounded once more)."""
    cfg = ring_cfg(64)
    rows = rng.standard_normal((40, 2, 128)).astype(np.float32)
    t = torch.from_numpy(rows).to(getattr(torch, dtype))
    expected = t.double().numpy().astype(np.float16)
    a, b, c = ladder.Plane(cfg), ladder.Plane(cfg), ladder.Plane(cfg)
    a.extend(t, t)
    for pos in range(40):
        b.append_row(pos, t[pos], t[pos])
        c.write_row(c.append(pos), t[pos], t[pos])
    for plane in (a, b, c):
        np.testing.assert_array_equal(plane.keys()[:40], expected)
        np.testing.assert_array_equal(plane.values()[:40], expected)


@pytest.fixture
def ready(rng):
    plane = ladder.Plane(ring_cfg(64))
    Filled(plane, rng, 40)
    slot = plane.append(40)
    q = torch.randn(32, 128, dtype=torch.bfloat16)
    kv = torch.randn(2, 128, dtype=torch.bfloat16)
    return plane, slot, q, kv


def snapshot(plane):
    return plane.state, plane.keys().copy(), plane.values().copy()


def assert_untouched(plane, before):
    state, keys, values = snapshot(plane)
    assert state == before[0]
    np.testing.assert_array_equal(keys.view(np.uint16), before[1].view(np.uint16))
    np.testing.assert_array_equal(values.view(np.uint16), before[2].view(np.uint16))


def test_bad_dtypes_raise_dtype_error(ready):
    plane, slot, q, kv = ready
    before = snapshot(plane)
    for bad in (torch.float64, torch.int32, torch.int8):
        with pytest.raises(ladder.DTypeError, match=r"q must be float32, float16 or bfloat16 with shape \(32, 128\)"):
            ladder.attend("splitk", plane, 40, slot, q.to(bad), kv, kv)
        with pytest.raises(ladder.DTypeError, match="v must be float32, float16 or bfloat16"):
            ladder.attend("splitk", plane, 40, slot, q, kv, kv.to(bad))
        with pytest.raises(ladder.DTypeError, match="out must be float32, float16 or bfloat16"):
            ladder.attend("splitk", plane, 40, slot, q, kv, kv, out=torch.empty(32, 128, dtype=bad))
        with pytest.raises(ladder.DTypeError, match="k must be float32, float16 or bfloat16"):
            plane.extend(torch.zeros(3, 2, 128, dtype=bad), torch.zeros(3, 2, 128, dtype=bad))
    assert_untouched(plane, before)


def test_bad_layouts_and_shapes_raise_shape_error(ready):
    plane, slot, q, kv = ready
    before = snapshot(plane)
    with pytest.raises(ladder.ShapeError, match="q must be C-contiguous"):
        ladder.attend("splitk", plane, 40, slot, torch.randn(128, 32, dtype=torch.bfloat16).t(), kv, kv)
    with pytest.raises(ladder.ShapeError, match="k must be C-contiguous"):
        ladder.attend("splitk", plane, 40, slot, q, torch.randn(2, 256, dtype=torch.float16)[:, ::2], kv)
    with pytest.raises(ladder.ShapeError, match=r"v must have shape \(2, 128\) = \(n_kv_heads, head_dim\), got \(2, 64\)"):
        ladder.attend("splitk", plane, 40, slot, q, kv, kv[:, :64].contiguous())
    with pytest.raises(ladder.ShapeError, match=r"out must have shape \(32, 128\)"):
        ladder.attend("splitk", plane, 40, slot, q, kv, kv, out=torch.empty(1, 32, 128, dtype=torch.bfloat16))
    assert_untouched(plane, before)


def test_cuda_tensors_on_a_host_plane_raise(ready):
    plane, slot, q, kv = ready
    if not torch.cuda.is_available():
        pytest.skip("torch has no usable CUDA device here, so no CUDA tensor can be made")
    before = snapshot(plane)
    with pytest.raises((ladder.NoDeviceError, ladder.DeviceMismatchError)):
        ladder.attend("splitk", plane, 40, slot, q.cuda(), kv.cuda(), kv.cuda())
    assert_untouched(plane, before)
