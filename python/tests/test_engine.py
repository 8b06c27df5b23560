"""ladder.Engine: the library's one engine from Python, one layer at a time. A batch of sequences
with prompts of different lengths decodes until the rings wrap; every output against the f64
reference of its own sequence's window, and bit for bit against the per-plane path (one
ladder.Plane per sequence and layer, ladder.attend) on the same inputs: the same routes on the
same rows; refused calls change nothing."""
import numpy as np
import pytest

import ladder
from helpers import f16_round, reference, rel_err
from test_attend import TOLERANCE

WINDOW = 16
N_HEADS, N_KV, HEAD_DIM = 4, 2, 32
GPU_HEAD_DIM = 128  # the CUDA kernels' one head_dim
CLASSES = ["swa", "nope", "swa"]
PROMPTS = [5, 23, 40]


def geometry(max_context=4096, head_dim=HEAD_DIM):
    return ladder.Geometry(n_layers=len(CLASSES), n_heads=N_HEADS, n_kv_heads=N_KV, head_dim=head_dim, window=WINDOW,
                           max_context=max_context, layer_classes=CLASSES)


def rows(rng, n, head_dim=HEAD_DIM):
    return rng.standard_normal((n, N_KV, head_dim)).astype(np.float32)


class Window:
    """The f16-rounded rows of one (sequence, layer), for the reference."""

    def __init__(self, cls):
        self.cls, self.k, self.v = cls, [], []

    def add(self, k, v):
        self.k.extend(f16_round(k))
        self.v.extend(f16_round(v))

    def reference(self, q):
        n = len(self.k) if self.cls == "nope" else min(len(self.k), WINDOW)
        return reference(q, np.stack(self.k[-n:]), np.stack(self.v[-n:]))


class PerPlane:
    """The per-plane path the engine must match bit for bit: one host ladder.Plane per (sequence,
    layer), appended and attended through ladder.attend('auto') sequence by sequence."""

    def __init__(self, g, n_sequences):
        self.planes = [[ladder.Plane.for_layer(g, cls) for cls in CLASSES] for _ in range(n_sequences)]

    def prefill(self, i, layer, k, v):
        self.planes[i][layer].extend(k, v)

    def decode(self, layer, q, k, v):
        out = np.full_like(q, np.nan)
        for i, planes in enumerate(self.planes):
            plane = planes[layer]
            position = plane.next_position
            slot = plane.append(position)
            ladder.attend("auto", plane, position, slot, q[i], k[i], v[i], out[i])
        return out


def test_engine_matches_the_reference_and_the_per_plane_path(rng):
    engine = ladder.Engine(geometry())
    per_plane = PerPlane(geometry(), len(PROMPTS))
    assert engine.device == "cpu" and engine.sequences == []
    ids = [engine.add_sequence() for _ in PROMPTS]
    windows = {(i, layer): Window(CLASSES[layer]) for i in range(len(ids)) for layer in range(len(CLASSES))}
    for i, n in enumerate(PROMPTS):
        for layer in range(len(CLASSES)):
            k, v = rows(rng, n), rows(rng, n)
            slots = engine.fill_rows(layer, ids[i], k, v)
            # A growing plane's row p is slot p; a ring's slots go round its WINDOW rows.
            assert slots == [p % WINDOW if CLASSES[layer] == "swa" else p for p in range(n)]
            per_plane.prefill(i, layer, k, v)
            windows[(i, layer)].add(k, v)
    assert [engine.next_position(s, 0) for s in ids] == PROMPTS

    worst = 0.0
    for _ in range(2 * WINDOW + 3):  # every ring wraps
        for layer in range(len(CLASSES)):
            q = rng.standard_normal((len(ids), N_HEADS, HEAD_DIM)).astype(np.float32)
            k, v = rows(rng, len(ids)), rows(rng, len(ids))
            out = np.full_like(q, np.nan)
            engine.encode_layer(layer, ids, q, k, v, out)
            np.testing.assert_array_equal(out, per_plane.decode(layer, q, k, v))
            for i in range(len(ids)):
                windows[(i, layer)].add(k[i:i + 1], v[i:i + 1])
                worst = max(worst, rel_err(out[i], windows[(i, layer)].reference(q[i])))
    assert worst <= TOLERANCE
    state = engine.state(ids[0], 0)
    assert state.origin_logical > WINDOW  # the ring wrapped
    assert engine.range_stats() == (0, 0)


def test_fill_batch_equals_one_fill_per_sequence(rng):
    """A batch's prompts through fill_batch (row r of every sequence in one engine call) leave
    the planes as per-sequence fill_rows calls do: the same slots and states, and the same bits
    from every later decode; prompts of 0 rows and rings that wrap inside the prompt included."""
    counts = [5, 0, 23, 40]
    batched, single = ladder.Engine(geometry()), ladder.Engine(geometry())
    ids = [batched.add_sequence() for _ in counts]
    assert [single.add_sequence() for _ in counts] == ids
    for layer in range(len(CLASSES)):
        prompts = [(rows(rng, n), rows(rng, n)) for n in counts]
        slots = batched.fill_batch(layer, ids, counts, np.concatenate([k for k, _ in prompts]),
                                   np.concatenate([v for _, v in prompts]))
        assert slots == [single.fill_rows(layer, i, k, v) for i, (k, v) in zip(ids, prompts)]
    for i in ids:
        for layer in range(len(CLASSES)):
            assert batched.state(i, layer) == single.state(i, layer)
    for _ in range(WINDOW + 3):
        for layer in range(len(CLASSES)):
            q = rng.standard_normal((len(ids), N_HEADS, HEAD_DIM)).astype(np.float32)
            k, v = rows(rng, len(ids)), rows(rng, len(ids))
            out_b, out_s = np.full_like(q, np.nan), np.full_like(q, np.nan)
            batched.encode_layer(layer, ids, q, k, v, out_b)
            single.encode_layer(layer, ids, q, k, v, out_s)
            np.testing.assert_array_equal(out_b, out_s)
            assert np.isfinite(out_b).all()


def test_refused_fill_batch_changes_nothing(rng):
    engine = ladder.Engine(geometry(max_context=32))
    a, b = engine.add_sequence(), engine.add_sequence()
    engine.fill_rows(0, b, rows(rng, 30), rows(rng, 30))
    before = [engine.state(s, layer) for s in (a, b) for layer in range(len(CLASSES))]
    with pytest.raises(ladder.PositionError, match="sequence %d" % b):
        engine.fill_batch(0, [a, b], [4, 3], rows(rng, 7), rows(rng, 7))  # b: 30 + 3 rows pass 32
    with pytest.raises(ladder.InvalidArgumentError, match="twice"):
        engine.fill_batch(0, [a, a], [1, 1], rows(rng, 2), rows(rng, 2))
    with pytest.raises(ladder.InvalidArgumentError, match="one count per sequence"):
        engine.fill_batch(0, [a, b], [2], rows(rng, 2), rows(rng, 2))
    with pytest.raises(ladder.InvalidArgumentError, match=">= 0"):
        engine.fill_batch(0, [a, b], [3, -1], rows(rng, 2), rows(rng, 2))
    with pytest.raises(ladder.ShapeError):
        engine.fill_batch(0, [a, b], [2, 2], rows(rng, 3), rows(rng, 3))  # 3 rows for counts summing to 4
    with pytest.raises(ladder.InvalidArgumentError, match="sequence 99 is not in this engine"):
        engine.fill_batch(0, [a, 99], [1, 1], rows(rng, 2), rows(rng, 2))
    assert [engine.state(s, layer) for s in (a, b) for layer in range(len(CLASSES))] == before


def test_model_dtypes_and_the_range_counters(rng):
    engine = ladder.Engine(geometry())
    a, b = engine.add_sequence(), engine.add_sequence()
    q = rng.standard_normal((2, N_HEADS, HEAD_DIM)).astype(np.float32)
    k, v = rows(rng, 2), rows(rng, 2)
    out16 = np.zeros((2, N_HEADS, HEAD_DIM), dtype=np.float16)
    engine.encode_layer(0, [a, b], q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), out16)
    assert engine.range_stats() == (0, 0)
    k[1, 0, 3] = 1.0e6  # beyond f16: read as 65504 and counted
    out = np.zeros((2, N_HEADS, HEAD_DIM), dtype=np.float32)
    engine.encode_layer(1, [a, b], q, k, v, out)
    assert engine.range_stats() == (1, 0)
    # One token each: the output is the token's own (f16-rounded, range-ruled) v row per head.
    kv_head = np.arange(N_HEADS) // (N_HEADS // N_KV)
    for i in range(2):
        np.testing.assert_allclose(out[i], f16_round(v[i])[kv_head], rtol=1e-6)
        np.testing.assert_allclose(out16[i].astype(np.float32), f16_round(v[i].astype(np.float16))[kv_head],
                                   rtol=2.0**-10)


def test_refused_calls_change_nothing(rng):
    engine = ladder.Engine(geometry(max_context=32))
    a, b = engine.add_sequence(), engine.add_sequence()
    engine.fill_rows(0, a, rows(rng, 30), rows(rng, 30))
    before = [engine.state(s, layer) for s in (a, b) for layer in range(len(CLASSES))]
    q = rng.standard_normal((2, N_HEADS, HEAD_DIM)).astype(np.float32)
    k, v = rows(rng, 2), rows(rng, 2)
    out = np.zeros_like(q)
    with pytest.raises(ladder.PositionError):
        engine.fill_rows(0, a, rows(rng, 3), rows(rng, 3))  # 30 + 3 rows pass the max context 32
    with pytest.raises(ladder.InvalidArgumentError, match="layer 3 does not exist"):
        engine.encode_layer(3, [a, b], q, k, v, out)
    with pytest.raises(ladder.InvalidArgumentError, match="sequence 99 is not in this engine"):
        engine.encode_layer(0, [a, 99], q, k, v, out)
    with pytest.raises(ladder.ShapeError):
        engine.encode_layer(0, [a], q, k, v, out)  # arrays of 2 sequences for 1
    with pytest.raises(ladder.InvalidArgumentError, match="twice"):
        engine.encode_layer(0, [a, a], q, k, v, out)
    assert [engine.state(s, layer) for s in (a, b) for layer in range(len(CLASSES))] == before
    engine.remove_sequence(b)
    assert engine.sequences == [a]
    with pytest.raises(ladder.InvalidArgumentError):
        engine.remove_sequence(b)
    with pytest.raises(ladder.InvalidArgumentError, match="device must be"):
        ladder.Engine(geometry(), device="tpu")


@pytest.mark.skipif(not ladder.cuda_available(), reason="needs a CUDA build of ladder and a GPU")
def test_cuda_engine_reads_cuda_tensors_in_place(rng):
    torch = pytest.importorskip("torch")
    gpu = ladder.Engine(geometry(head_dim=GPU_HEAD_DIM), device="cuda")
    cpu = ladder.Engine(geometry(head_dim=GPU_HEAD_DIM))
    ids = [gpu.add_sequence() for _ in PROMPTS]
    assert [cpu.add_sequence() for _ in PROMPTS] == ids
    for i, n in enumerate(PROMPTS):
        for layer in range(len(CLASSES)):
            k, v = rows(rng, n, GPU_HEAD_DIM), rows(rng, n, GPU_HEAD_DIM)
            gpu.fill_rows(layer, ids[i], torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
            cpu.fill_rows(layer, ids[i], k, v)
    for _ in range(WINDOW + 3):
        for layer in range(len(CLASSES)):
            q = rng.standard_normal((len(ids), N_HEADS, GPU_HEAD_DIM)).astype(np.float32)
            k, v = rows(rng, len(ids), GPU_HEAD_DIM), rows(rng, len(ids), GPU_HEAD_DIM)
            out = torch.full((len(ids), N_HEADS, GPU_HEAD_DIM), float("nan"), dtype=torch.bfloat16, device="cuda")
            gpu.encode_layer(layer, ids, *(torch.from_numpy(x).cuda().to(torch.bfloat16) for x in (q, k, v)), out)
            ref = np.zeros_like(q)
            qb, kb, vb = (torch.from_numpy(x).to(torch.bfloat16).float().numpy() for x in (q, k, v))
            cpu.encode_layer(layer, ids, qb, kb, vb, ref)
            got = out.float().cpu().numpy()
            # Both read the same bfloat16-rounded inputs; the GPU's output is rounded to bfloat16
            # (half an ulp, 2^-9 relative) and its producer's arithmetic differs within P3's bound
            # (the tensor-core and CPU producers sit ~1e-6 from f64, relative to the output's scale:
            # hence the absolute floor for entries near zero).
            floor = 1e-5 * float(np.abs(ref).max())
            np.testing.assert_allclose(got, ref, rtol=2.0**-8 + TOLERANCE, atol=floor)
    assert gpu.device == "cuda"
