"""The same routes on the GPU through torch CUDA tensors (zero copy); skipped without CUDA."""
import numpy as np
import pytest

import ladder
from helpers import Filled, f16_round, random_rows, reference, rel_err

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (ladder.cuda_available() and torch.cuda.is_available()),
                                reason="needs a CUDA build of ladder and a GPU")

TOLERANCE = 2e-3


def ring_cfg(window, slack=0):
    return ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=128, capacity=window + slack, max_context=1 << 20,
                              window=window)


def growing_cfg(capacity=64):
    return ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=128, capacity=capacity, max_context=1 << 20)


CASES = [
    ("splitk-partially-wrapped", ring_cfg(64, slack=9), 100, "splitk"),
    ("splitk-ragged", ring_cfg(64), 40, "splitk"),
    ("vec-ring-wrapped-full", ring_cfg(64), 130, "vec"),
    ("vec-growing-ragged", growing_cfg(), 70, "vec"),
    ("interleaved-growing", growing_cfg(), 100, "interleaved"),
    ("interleaved-first-token", growing_cfg(), 0, "interleaved"),
    ("staged-wrapped", ring_cfg(64, slack=5), 80, "staged"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_route_on_cuda_tensors(rng, case):
    _, cfg, position, route = case
    plane = ladder.Plane(cfg, device="cuda")
    filled = Filled(plane, rng, position)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    slot = plane.append(position)
    tq, tk, tv = (torch.from_numpy(a).cuda() for a in (q, k, v))
    out = torch.full((32, 128), float("nan"), device="cuda")
    ptr = out.data_ptr()
    got = ladder.attend(route, plane, position, slot, tq, tk, tv, out=out)
    assert got is out and out.data_ptr() == ptr  # written in place
    cur = (k.astype(np.float64), v.astype(np.float64)) if route == "interleaved" else (f16_round(k), f16_round(v))
    k_rows, v_rows = filled.window(position, *cur)
    res = out.cpu().numpy()
    assert np.isfinite(res).all()
    assert rel_err(res, reference(q, k_rows, v_rows)) < TOLERANCE


def test_cpu_and_gpu_planes_hold_the_same_rows(rng):
    host = ladder.Plane(ring_cfg(64, slack=3))
    dev = ladder.Plane(ring_cfg(64, slack=3), device="cuda")
    for pos in range(90):
        k, v = random_rows(rng, 2, 128)
        assert host.append_row(pos, k, v) == dev.append_row(pos, torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))


def test_mismatched_devices(rng):
    host = ladder.Plane(growing_cfg())
    slot = host.append(0)
    q = torch.randn(32, 128, device="cuda")
    k = torch.randn(2, 128, device="cuda")
    with pytest.raises(ladder.DeviceMismatchError, match="host memory"):
        ladder.attend("interleaved", host, 0, slot, q, k, k.clone())
    dev = ladder.Plane(growing_cfg(), device="cuda")
    slot = dev.append(0)
    with pytest.raises(ladder.DeviceMismatchError, match="CUDA tensors"):
        ladder.attend("interleaved", dev, 0, slot, q.cpu().numpy(), k.cpu().numpy(), k.cpu().numpy())
    with pytest.raises(ladder.DeviceMismatchError, match="k is on cpu"):
        ladder.attend("interleaved", dev, 0, slot, q, k.cpu(), k)


def test_unsupported_head_dim_on_gpu():
    cfg = ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=64, capacity=64, max_context=100)
    plane = ladder.Plane(cfg, device="cuda")
    slot = plane.append(0)
    q = torch.randn(8, 64, device="cuda")
    k = torch.randn(2, 64, device="cuda")
    with pytest.raises(ladder.UnsupportedError):
        ladder.attend("interleaved", plane, 0, slot, q, k, k.clone())


def test_host_plane_mirrored_to_the_gpu(rng):
    plane = ladder.Plane(growing_cfg())
    filled = Filled(plane, rng, 50)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    slot = plane.append(50)
    out = ladder.attend("vec", plane, 50, slot, q, k, v, device="cuda")
    k_rows, v_rows = filled.window(50, f16_round(k), f16_round(v))
    assert rel_err(out, reference(q, k_rows, v_rows)) < TOLERANCE


def test_extend_on_a_device_plane(rng):
    host = ladder.Plane(growing_cfg(capacity=32))
    dev = ladder.Plane(growing_cfg(capacity=32), device="cuda")
    k = rng.standard_normal((100, 2, 128)).astype(np.float32)
    v = rng.standard_normal((100, 2, 128)).astype(np.float32)
    assert host.extend(k, v) == dev.extend(k, v)
    assert host.state == dev.state
    np.testing.assert_array_equal(host.values().view(np.uint16), dev.values().view(np.uint16))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_route_on_bf16_device_planes(rng, case):
    """bf16 device planes: every route against the reference of the bf16-rounded rows, and the
    device plane's stored words equal a host bf16 plane's (the GPU store rounds as the CPU does)."""
    from test_kv_dtype import bf16_cfg, bf16_round

    _, f16_cfg, position, route = case
    cfg = bf16_cfg(f16_cfg)
    dev, host = ladder.Plane(cfg, device="cuda"), ladder.Plane(cfg)
    k_hist, v_hist = [], []
    for pos in range(position):
        k, v = random_rows(rng, 2, 128)
        dev.append_row(pos, torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
        host.append_row(pos, k, v)
        k_hist.append(bf16_round(k))
        v_hist.append(bf16_round(v))
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    slot = dev.append(position)
    out = torch.full((32, 128), float("nan"), device="cuda")
    ladder.attend(route, dev, position, slot, *(torch.from_numpy(a).cuda() for a in (q, k, v)), out=out)
    cur = (k.astype(np.float64), v.astype(np.float64)) if route == "interleaved" else (bf16_round(k), bf16_round(v))
    visible = min(position + 1, cfg.window) if cfg.kind == "ring" else position + 1
    first = position + 1 - visible
    k_rows = np.stack(k_hist[first:position] + [cur[0]])
    v_rows = np.stack(v_hist[first:position] + [cur[1]])
    res = out.cpu().numpy()
    assert np.isfinite(res).all()
    assert rel_err(res, reference(q, k_rows, v_rows)) < TOLERANCE
    host.append_row(position, k, v)
    np.testing.assert_array_equal(dev.keys().view(np.uint32), host.keys().view(np.uint32))
    np.testing.assert_array_equal(dev.values().view(np.uint32), host.values().view(np.uint32))
