"""ladder.ModelCache: a batch of sequences over every layer of a geometry with sliding-window and
global layers. Prompts of different lengths, decode until the rings wrap several times,
sequences leaving and joining; every output against the f64 reference of its own sequence's
window, and every refused call leaving every plane as it was."""
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import ladder
from helpers import f16_round, reference, rel_err
from test_attend import TOLERANCE

WINDOW = 16
N_HEADS, N_KV, HEAD_DIM = 4, 2, 32
CLASSES = ["swa", "nope", "swa"]


def geometry(max_context=4096):
    return ladder.Geometry(n_layers=len(CLASSES), n_heads=N_HEADS, n_kv_heads=N_KV, head_dim=HEAD_DIM, window=WINDOW,
                           max_context=max_context, layer_classes=CLASSES)


class History:
    """The f16-rounded rows every (sequence, layer) holds, in logical order, for the reference."""

    def __init__(self):
        self.rows = {}

    def add(self, seq, layer, k, v):
        ks, vs = self.rows.setdefault((seq, layer), ([], []))
        ks.extend(f16_round(k))
        vs.extend(f16_round(v))

    def reference(self, seq, layer, q):
        ks, vs = self.rows[(seq, layer)]
        visible = len(ks) if CLASSES[layer] == "nope" else min(len(ks), WINDOW)
        return reference(q, np.stack(ks[-visible:]), np.stack(vs[-visible:]))


def prefill(cache, hist, rng, seq, rows):
    for layer in range(cache.n_layers):
        k = rng.standard_normal((rows, N_KV, HEAD_DIM)).astype(np.float32)
        v = rng.standard_normal((rows, N_KV, HEAD_DIM)).astype(np.float32)
        cache.prefill(seq, layer, k, v)
        hist.add(seq, layer, k, v)


def decode_and_check(cache, hist, rng, steps, convert=lambda x: x, out_tolerance=0.0):
    seqs = cache.sequences
    batch = len(seqs)
    for _ in range(steps):
        for layer in range(cache.n_layers):
            q = rng.standard_normal((batch, N_HEADS, HEAD_DIM)).astype(np.float32)
            k = rng.standard_normal((batch, N_KV, HEAD_DIM)).astype(np.float32)
            v = rng.standard_normal((batch, N_KV, HEAD_DIM)).astype(np.float32)
            qc, kc, vc = convert(q), convert(k), convert(v)
            out = cache.decode(layer, qc, kc, vc)
            got = np.asarray(out.double() if hasattr(out, "double") else out, dtype=np.float64)
            assert np.isfinite(got).all()
            as64 = [np.asarray(x.double() if hasattr(x, "double") else x, dtype=np.float64) for x in (qc, kc, vc)]
            for i, seq in enumerate(seqs):
                hist.add(seq, layer, as64[1][i:i + 1], as64[2][i:i + 1])
                assert rel_err(got[i], hist.reference(seq, layer, as64[0][i])) < TOLERANCE + out_tolerance, (seq, layer)


def test_batch_of_different_lengths_wraps_and_matches_reference(rng):
    cache = ladder.ModelCache(geometry())
    hist = History()
    for rows in (5, 23, 40):  # below, around and past the window
        prefill(cache, hist, rng, cache.add_sequence(), rows)
    decode_and_check(cache, hist, rng, steps=3 * WINDOW)  # every ring wraps at least three times
    assert [cache.length(s) for s in cache.sequences] == [5 + 48, 23 + 48, 40 + 48]
    for s in cache.sequences:
        ring, growing, _ = cache.states(s)
        # A full ring holds the last WINDOW positions, the oldest at the slot the next one takes.
        assert (ring.capacity, ring.len, ring.origin_logical) == (WINDOW, WINDOW, cache.length(s) - WINDOW)
        assert ring.origin_physical == cache.length(s) % WINDOW
        assert growing.len == growing.next_position == cache.length(s, 1) and growing.capacity >= growing.len


def test_prefill_batch_writes_every_prompt_against_the_reference(rng):
    """A batch's prompts in one prefill_batch per layer (row r of every sequence in one engine
    call), then decode: every output against its own sequence's f64 reference."""
    cache = ladder.ModelCache(geometry())
    hist = History()
    counts = [5, 0, 23, 40]
    seqs = [cache.add_sequence() for _ in counts]
    for layer in range(cache.n_layers):
        prompts = [(rng.standard_normal((n, N_KV, HEAD_DIM)).astype(np.float32),
                    rng.standard_normal((n, N_KV, HEAD_DIM)).astype(np.float32)) for n in counts]
        slots = cache.prefill_batch(layer, seqs, counts, np.concatenate([k for k, _ in prompts]),
                                    np.concatenate([v for _, v in prompts]))
        assert [len(s) for s in slots] == counts
        for seq, (k, v) in zip(seqs, prompts):
            if len(k):
                hist.add(seq, layer, k, v)
    assert [cache.length(s) for s in seqs] == counts
    decode_and_check(cache, hist, rng, steps=WINDOW + 2)
    with pytest.raises(ladder.InvalidArgumentError, match="not in this cache"):
        cache.prefill_batch(0, [seqs[0], 999], [1, 1], np.zeros((2, N_KV, HEAD_DIM), np.float32),
                            np.zeros((2, N_KV, HEAD_DIM), np.float32))


def test_sequences_leave_and_join(rng):
    cache = ladder.ModelCache(geometry())
    hist = History()
    a, b, c = (cache.add_sequence() for _ in range(3))
    for seq, rows in ((a, 7), (b, 30), (c, 1)):
        prefill(cache, hist, rng, seq, rows)
    decode_and_check(cache, hist, rng, steps=5)
    cache.remove_sequence(b)
    assert cache.sequences == [a, c]
    decode_and_check(cache, hist, rng, steps=WINDOW + 3)
    d = cache.add_sequence()
    prefill(cache, hist, rng, d, 19)
    assert cache.sequences == [a, c, d]
    decode_and_check(cache, hist, rng, steps=WINDOW)
    with pytest.raises(ladder.InvalidArgumentError, match="not in this cache"):
        cache.remove_sequence(b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_model_dtypes(rng, dtype):
    torch = pytest.importorskip("torch", reason="torch is not importable: the torch tensor tests need it")
    cache = ladder.ModelCache(geometry())
    hist = History()
    for rows in (3, 20):
        prefill(cache, hist, rng, cache.add_sequence(), rows)
    # The output is rounded to the model's dtype: half an ulp at 1.0 relative (see test_dtypes).
    rounding = {"float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    decode_and_check(cache, hist, rng, steps=2 * WINDOW,
                     convert=lambda x: torch.from_numpy(x).to(getattr(torch, dtype)), out_tolerance=rounding)


def snapshot(cache):
    """Every sequence's plane state at every layer (the engine's own record of what each holds)."""
    return {s: cache.states(s) for s in cache.sequences}


def test_refused_decode_leaves_every_plane_untouched(rng):
    cache = ladder.ModelCache(geometry(max_context=64))
    hist = History()
    for rows in (10, 20, 64):  # the last sequence is at the max context: its next append is refused
        prefill(cache, hist, rng, cache.add_sequence(), rows)
    a, b, full = cache.sequences
    q = rng.standard_normal((3, N_HEADS, HEAD_DIM)).astype(np.float32)
    kv = rng.standard_normal((3, N_KV, HEAD_DIM)).astype(np.float32)
    before = snapshot(cache)
    with pytest.raises(ladder.PositionError):
        cache.decode(0, q, kv, kv)
    with pytest.raises(ladder.DTypeError, match="q must be float32, float16 or bfloat16"):
        cache.decode(0, q.astype(np.float64), kv, kv)
    with pytest.raises(ladder.ShapeError, match="batch = 3 sequences"):
        cache.decode(0, q[:2], kv[:2], kv[:2])
    with pytest.raises(ladder.ShapeError, match="k must have shape"):
        cache.decode(0, q, kv[:, :1].copy(), kv)
    with pytest.raises(ladder.InvalidArgumentError, match="layer 3 does not exist"):
        cache.decode(3, q, kv, kv)
    with pytest.raises(ladder.InvalidArgumentError, match="not in this cache"):
        cache.decode(0, q, kv, kv, seqs=[a, b, full + 1])
    with pytest.raises(ladder.InvalidArgumentError, match="twice"):
        cache.decode(0, q, kv, kv, seqs=[a, b, a])
    assert snapshot(cache) == before
    # Without the full sequence the same call goes through, and every later output is the
    # reference over the rows the history holds: no refused call stored a row anywhere.
    cache.remove_sequence(full)
    decode_and_check(cache, hist, rng, steps=WINDOW + 2)


def test_refused_prefill_leaves_the_plane_untouched(rng):
    cache = ladder.ModelCache(geometry(max_context=64))
    hist = History()
    seq = cache.add_sequence()
    prefill(cache, hist, rng, seq, 60)
    before = snapshot(cache)
    rows = rng.standard_normal((5, N_KV, HEAD_DIM)).astype(np.float32)
    with pytest.raises(ladder.PositionError):
        cache.prefill(seq, 1, rows, rows)  # 60 + 5 > max context 64
    with pytest.raises(ladder.DTypeError):
        cache.prefill(seq, 1, rows[:2].astype(np.float64), rows[:2].astype(np.float64))
    with pytest.raises(ladder.ShapeError):
        cache.prefill(seq, 1, rows[:2], rows[:3])
    with pytest.raises(ladder.InvalidArgumentError, match="layer 3 does not exist"):
        cache.prefill(seq, 3, rows[:2], rows[:2])
    with pytest.raises(ladder.InvalidArgumentError, match="not in this cache"):
        cache.prefill(seq + 1, 1, rows[:2], rows[:2])
    with pytest.raises(ladder.InvalidArgumentError, match="not in this cache"):
        cache.prefill("a", 1, rows[:2], rows[:2])
    with pytest.raises(ladder.InvalidArgumentError, match="layer must be an integer"):
        cache.prefill(seq, 1.5, rows[:2], rows[:2])
    assert snapshot(cache) == before
    assert cache.state(seq, np.int64(1)) == before[seq][1]  # numpy integers are layers too
    prefill(cache, hist, rng, seq, 3)  # 60 + 3 rows fit
    decode_and_check(cache, hist, rng, steps=1)  # the last position, 63, against the reference


_FINITE_CHECK_CHILD = """
import numpy as np
import ladder
n_kv, hd = %d, %d
g = ladder.Geometry(n_layers=3, n_heads=%d, n_kv_heads=n_kv, head_dim=hd, window=%d, max_context=4096,
                    layer_classes=%r)
cache = ladder.ModelCache(g, initial_growing_capacity=4)
rng = np.random.default_rng(5)
a, b = cache.add_sequence(), cache.add_sequence()
for s in (a, b):
    for layer in range(3):
        r = rng.standard_normal((2, n_kv, hd)).astype(np.float32)
        cache.prefill(s, layer, r, r)
before = {s: cache.states(s) for s in cache.sequences}
counts = [30, 12]
k = rng.standard_normal((42, n_kv, hd)).astype(np.float32)
v = rng.standard_normal((42, n_kv, hd)).astype(np.float32)
bad = v.copy()
bad[-1, 1, 7] = np.nan  # b's last row
for layer in range(3):
    try:
        cache.prefill_batch(layer, [a, b], counts, k, bad)
        raise SystemExit("a NaN row was accepted at layer %%d" %% layer)
    except ladder.InvalidArgumentError as e:
        assert "finite" in str(e) or "NaN" in str(e), str(e)
assert {s: cache.states(s) for s in cache.sequences} == before, "a refused prefill wrote rows"
for layer in range(3):
    cache.prefill_batch(layer, [a, b], counts, k, v)
assert [cache.length(s) for s in (a, b)] == [32, 14]
grown = cache.state(a, 1)  # the growing layer: 4 -> 32 rows at the prompt's first row
assert (grown.len, grown.capacity) == (32, 32), grown
print("ok")
""" % (N_KV, HEAD_DIM, N_HEADS, WINDOW, CLASSES)


def test_prefill_is_all_or_nothing_under_the_finite_check():
    """N1's opt-in check (LADDER_CHECK_FINITE=1, read once per process: hence a child process)
    covers every row of a prompt before the first is written: a NaN in the last row of one
    sequence of a prefill_batch refuses the whole call and writes nothing; the same call without
    it writes every row, a growing plane grown once to the capacity the last row needs."""
    env = dict(os.environ, LADDER_CHECK_FINITE="1")
    done = subprocess.run([sys.executable, "-c", _FINITE_CHECK_CHILD], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_decode_a_subset_in_any_order(rng):
    """seqs picks the batch rows' sequences: the others keep their positions, and each row's output
    is its own sequence's reference."""
    cache = ladder.ModelCache(geometry())
    hist = History()
    a, b, c = (cache.add_sequence() for _ in range(3))
    for seq, rows in ((a, 3), (b, 17), (c, 9)):
        prefill(cache, hist, rng, seq, rows)
    for _ in range(WINDOW + 1):
        for layer in range(cache.n_layers):
            q = rng.standard_normal((2, N_HEADS, HEAD_DIM)).astype(np.float32)
            k = rng.standard_normal((2, N_KV, HEAD_DIM)).astype(np.float32)
            v = rng.standard_normal((2, N_KV, HEAD_DIM)).astype(np.float32)
            out = np.full_like(q, np.nan)
            assert cache.decode(layer, q, k, v, out=out, seqs=[c, a]) is out
            for i, seq in enumerate((c, a)):
                hist.add(seq, layer, k[i:i + 1], v[i:i + 1])
                assert rel_err(out[i], hist.reference(seq, layer, q[i])) < TOLERANCE
    assert [cache.length(s) for s in (a, b, c)] == [3 + WINDOW + 1, 17, 9 + WINDOW + 1]


def config(**fields):
    base = dict(num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=128, hidden_size=256,
                sliding_window=64, max_position_embeddings=1024, model_type="toy",
                layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])
    base.update(fields)
    return types.SimpleNamespace(**base)


def test_geometry_from_config():
    g = ladder.geometry_from_config(config())
    assert (g.n_layers, g.n_heads, g.n_kv_heads, g.head_dim, g.window, g.max_context) == (4, 8, 2, 128, 64, 1024)
    assert [g.layer_class(i) for i in range(4)] == ["swa", "nope", "swa", "nope"]
    assert ladder.geometry_from_config(config(), max_context=300).max_context == 300
    g = ladder.geometry_from_config(config(layer_types=None, head_dim=None))
    assert [g.layer_class(i) for i in range(4)] == ["swa"] * 4 and g.head_dim == 32
    g = ladder.geometry_from_config(config(layer_types=None, sliding_window=None))
    assert [g.layer_class(i) for i in range(4)] == ["nope"] * 4
    with pytest.raises(ladder.UnsupportedError, match="layer 1 is a 'chunked_attention' layer"):
        ladder.geometry_from_config(config(layer_types=["sliding_attention", "chunked_attention"] * 2))
    with pytest.raises(ladder.InvalidArgumentError, match="sliding_window is not set"):
        ladder.geometry_from_config(config(sliding_window=None))
    cache = ladder.ModelCache.from_config(config())
    seq = cache.add_sequence()
    assert cache.layer_classes == ["swa", "nope", "swa", "nope"]
    assert [st.capacity for st in cache.states(seq)][::2] == [64, 64]  # the rings hold the window


# The cache on either device with torch tensors in bfloat16, head_dim 128 (the GPU kernels'):
# prompts of different lengths, decode until the rings wrap, a refused decode that changes
# nothing. On 'cuda' the tensors stay on the GPU and the engine reads them in place.
GPU_HEAD_DIM = 128
GPU_CLASSES = ["swa", "nope"]
GPU_PROMPTS = [3, 21, 40]
# Both devices round the bfloat16 output (half an ulp at 1.0, 2^-9 relative; allowed 2^-8 as in
# test_torch_model_dtypes); the GPU's tensor-core producer differs from the CPU's arithmetic
# within P3's bound (TOLERANCE).
BF16_OUT = 2.0**-8


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_cache_on_each_device_with_bf16_tensors(rng, device):
    torch = pytest.importorskip("torch", reason="torch is not importable: the torch tensor tests need it")
    if device == "cuda" and not (ladder.cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs a CUDA build of ladder and a GPU")
    g = ladder.Geometry(n_layers=len(GPU_CLASSES), n_heads=N_HEADS, n_kv_heads=N_KV, head_dim=GPU_HEAD_DIM,
                        window=WINDOW, max_context=64, layer_classes=GPU_CLASSES)
    cache = ladder.ModelCache(g, device=device)
    assert cache.device == device

    def tensor(shape):
        """Random bfloat16 on the device, and the values it holds in f64."""
        t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(torch.bfloat16).to(device)
        return t, t.double().cpu().numpy()

    rows = {}  # (seq, layer) -> (k rows, v rows), f16-rounded as the planes store them
    seqs = [cache.add_sequence() for _ in GPU_PROMPTS]
    for seq, n in zip(seqs, GPU_PROMPTS):
        for layer in range(len(GPU_CLASSES)):
            (k, k64), (v, v64) = tensor((n, N_KV, GPU_HEAD_DIM)), tensor((n, N_KV, GPU_HEAD_DIM))
            assert len(cache.prefill(seq, layer, k, v)) == n
            rows[(seq, layer)] = (list(f16_round(k64)), list(f16_round(v64)))
    steps = 64 - max(GPU_PROMPTS)  # the longest prompt reaches the max context
    for step in range(steps):
        for layer, cls in enumerate(GPU_CLASSES):
            (q, q64), (k, k64), (v, v64) = (tensor((len(seqs), N_HEADS, GPU_HEAD_DIM)),
                                            tensor((len(seqs), N_KV, GPU_HEAD_DIM)),
                                            tensor((len(seqs), N_KV, GPU_HEAD_DIM)))
            out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16, device=device)
            assert cache.decode(layer, q, k, v, out=out) is out
            got = out.double().cpu().numpy()
            for i, seq in enumerate(seqs):
                ks, vs = rows[(seq, layer)]
                ks.append(f16_round(k64[i]))
                vs.append(f16_round(v64[i]))
                n = len(ks) if cls == "nope" else min(len(ks), WINDOW)
                ref = reference(q64[i], np.stack(ks[-n:]), np.stack(vs[-n:]))
                assert rel_err(got[i], ref) < TOLERANCE + BF16_OUT, (device, step, layer, seq)
    assert [cache.length(s, 1) for s in seqs] == [n + steps for n in GPU_PROMPTS]
    # Every ring holds its sequence's last WINDOW tokens; the longest went round three times.
    assert [cache.state(s, 0).origin_logical for s in seqs] == [cache.length(s, 0) - WINDOW for s in seqs]
    assert cache.state(seqs[-1], 0).origin_logical >= 3 * WINDOW
    # The longest sequence is at the max context: the next decode is refused for the whole batch.
    before = snapshot(cache)
    (q, _), (k, _) = tensor((len(seqs), N_HEADS, GPU_HEAD_DIM)), tensor((len(seqs), N_KV, GPU_HEAD_DIM))
    with pytest.raises(ladder.PositionError):
        cache.decode(0, q, k, k)
    assert snapshot(cache) == before
