"""The same routes on the GPU through torch CUDA tensors (zero copy) on the library's own device
plane (Plane(device='cuda') is a one-layer sequence of the CUDA device); skipped without CUDA."""
import numpy as np
import pytest

import ladder
from helpers import Filled, f16_round, random_rows, reference, rel_err

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (ladder.cuda_available() and torch.cuda.is_available()),
                                reason="needs a CUDA build of ladder and a GPU")

TOLERANCE = 2e-3
N_HEADS = 32  # the query heads every device plane here is made for (16 per KV head)
# The device allocates a growing plane's rows at max_context up front: positions here stay below
# 200, so a small max context keeps each plane at 4 MiB instead of 1 GiB.
MAX_CONTEXT = 4096


def ring_cfg(window, slack=0):
    return ladder.PlaneConfig("ring", n_kv_heads=2, head_dim=128, capacity=window + slack, max_context=MAX_CONTEXT,
                              window=window)


def growing_cfg(capacity=64):
    return ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=128, capacity=capacity, max_context=MAX_CONTEXT)


def device_plane(cfg):
    return ladder.Plane(cfg, device="cuda", n_heads=N_HEADS)


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
    plane = device_plane(cfg)
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
    dev = device_plane(ring_cfg(64, slack=3))
    for pos in range(90):
        k, v = random_rows(rng, 2, 128)
        assert host.append_row(pos, k, v) == dev.append_row(pos, torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))


# GPU clock cycles one torch.cuda._sleep spins: ~50 ms on a ~2 GHz part, far longer than a row store.
SLEEP_CYCLES = 100_000_000


def test_rows_are_read_after_the_stream_that_wrote_them(rng):
    """write_row, append_row and extend wait for the stream that wrote their CUDA tensors: torch's
    current stream by default, or the one passed (a torch.cuda.Stream or its handle). The rows are
    produced on a side stream behind a GPU sleep, so a store that waited only for the default
    stream would read the buffers before the copy into them (zeros), and the planes would differ."""
    cfg = ring_cfg(64)
    host = ladder.Plane(cfg)
    dev = device_plane(cfg)
    n = 24
    k, v = (rng.standard_normal((n, 2, 128)).astype(np.float32) for _ in range(2))
    host.extend(k, v)
    src_k, src_v = (torch.from_numpy(a).cuda() for a in (k, v))
    torch.cuda.synchronize()
    side = torch.cuda.Stream()

    def late(src):  # on the current stream: zeros until the sleep is over, then src
        out = torch.zeros_like(src)
        torch.cuda._sleep(SLEEP_CYCLES)
        out.copy_(src)
        return out

    with torch.cuda.stream(side):
        dk, dv = late(src_k[:8]), late(src_v[:8])
        for i in range(8):
            dev.append_row(i, dk[i], dv[i])  # stream=None: torch's current stream, `side`
        dk, dv = late(src_k[8:16]), late(src_v[8:16])
    dev.extend(dk, dv, stream=side)
    with torch.cuda.stream(side):
        dk, dv = late(src_k[16:]), late(src_v[16:])
    for i in range(8):
        slot = dev.append(16 + i)
        dev.write_row(slot, dk[i], dv[i], stream=side.cuda_stream)
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))
    np.testing.assert_array_equal(host.values().view(np.uint16), dev.values().view(np.uint16))


def test_mismatched_devices(rng):
    host = ladder.Plane(growing_cfg())
    slot = host.append(0)
    q = torch.randn(32, 128, device="cuda")
    k = torch.randn(2, 128, device="cuda")
    with pytest.raises(ladder.DeviceMismatchError, match="host memory"):
        ladder.attend("interleaved", host, 0, slot, q, k, k.clone())
    dev = device_plane(growing_cfg())
    slot = dev.append(0)
    with pytest.raises(ladder.DeviceMismatchError, match="CUDA tensors"):
        ladder.attend("interleaved", dev, 0, slot, q.cpu().numpy(), k.cpu().numpy(), k.cpu().numpy())
    with pytest.raises(ladder.DeviceMismatchError, match="k is on cpu"):
        ladder.attend("interleaved", dev, 0, slot, q, k.cpu(), k)
    # The device plane is made for N_HEADS query heads: another count is refused, nothing runs.
    with pytest.raises(ladder.ShapeError, match="made for n_heads=32"):
        ladder.attend("interleaved", dev, 0, slot, q[:16], k, k.clone())
    out = torch.full((N_HEADS, 128), float("nan"), device="cuda")
    ladder.attend("interleaved", dev, 0, slot, q, k, k.clone(), out=out)
    assert torch.isfinite(out).all()


def test_device_plane_arguments():
    """head_dim other than the kernels' 128 is refused when the device plane is made; so is a
    device plane without its query-head count."""
    cfg = ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=64, capacity=64, max_context=100)
    with pytest.raises(ladder.UnsupportedError):
        ladder.Plane(cfg, device="cuda", n_heads=8)
    ladder.Plane(cfg).append(0)  # the host plane of the same configuration is fine
    with pytest.raises(ladder.InvalidArgumentError, match="needs n_heads"):
        ladder.Plane(growing_cfg(), device="cuda")
    with pytest.raises(ladder.InvalidArgumentError, match="needs n_heads"):
        ladder.Plane(growing_cfg(), device="cuda", n_heads=3)  # not a multiple of the 2 KV heads


def test_host_plane_mirrored_to_the_gpu(rng):
    plane = ladder.Plane(growing_cfg())
    filled = Filled(plane, rng, 50)
    k, v = random_rows(rng, 2, 128)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    slot = plane.append(50)
    out = ladder.attend("vec", plane, 50, slot, q, k, v, device="cuda")
    k_rows, v_rows = filled.window(50, f16_round(k), f16_round(v))
    assert rel_err(out, reference(q, k_rows, v_rows)) < TOLERANCE


@pytest.mark.parametrize("source", ["numpy", "cuda"])
@pytest.mark.parametrize("cfg", [growing_cfg(capacity=32), ring_cfg(64, slack=3)], ids=["growing", "ring"])
def test_extend_on_a_device_plane(rng, cfg, source):
    """100 rows at once (the growing plane grows twice, the ring wraps): the same slots, state and
    stored words as a host plane; a refused extend changes neither."""
    host, dev = ladder.Plane(cfg), device_plane(cfg)
    k = rng.standard_normal((100, 2, 128)).astype(np.float32)
    v = rng.standard_normal((100, 2, 128)).astype(np.float32)
    rows = (k, v) if source == "numpy" else (torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
    assert host.extend(k, v) == dev.extend(*rows)
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))
    np.testing.assert_array_equal(host.values().view(np.uint16), dev.values().view(np.uint16))
    too_many = np.ones((MAX_CONTEXT, 2, 128), dtype=np.float32)
    with pytest.raises(ladder.PositionError):
        dev.extend(too_many, too_many)
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))


def test_growing_plane_larger_than_its_max_context(rng):
    """A growing plane whose initial capacity passes its max context holds every position up to
    the max context (the device allocates PlaneConfig.max_rows rows), like the host plane."""
    cfg = ladder.PlaneConfig("growing", n_kv_heads=2, head_dim=128, capacity=128, max_context=100)
    host, dev = ladder.Plane(cfg), device_plane(cfg)
    k = rng.standard_normal((100, 2, 128)).astype(np.float32)
    v = rng.standard_normal((100, 2, 128)).astype(np.float32)
    assert host.extend(k, v) == dev.extend(k, v)
    assert host.state == dev.state
    np.testing.assert_array_equal(host.keys().view(np.uint16), dev.keys().view(np.uint16))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_route_on_bf16_device_planes(rng, case):
    """bf16 device planes: every route against the reference of the bf16-rounded rows, and the
    device plane's stored words equal a host bf16 plane's (the GPU store rounds as the CPU does)."""
    from test_kv_dtype import bf16_cfg, bf16_round

    _, f16_cfg, position, route = case
    cfg = bf16_cfg(f16_cfg)
    dev, host = device_plane(cfg), ladder.Plane(cfg)
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
