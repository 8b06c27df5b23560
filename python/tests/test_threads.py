"""The threading contract (docs/threads.md) with real threads: calls on one Plane from several
Python threads are serialized by the plane's lock. attend computes with the GIL released but
keeps the lock, so a writer thread appending (and growing, which frees the old rows) cannot
change the plane under an attend that is reading it. Calls on one Engine (a ModelCache) are
serialized the same way."""
import sys
import threading

import numpy as np
import pytest

import ladder
from helpers import f16_round, reference, rel_err

TOLERANCE = 2e-3  # P3: f16 KV on random inputs
N_KV, HEAD_DIM, N_HEADS = 2, 128, 8
# Positions the writer appends: the growing plane doubles 8 -> 16 -> ... -> 4096, eleven
# reallocations that free the rows a concurrent reader would otherwise still be reading.
N_POSITIONS = 4096
# Results checked against the f64 reference (spread over the run); each check is O(position).
MAX_CHECKED = 150
# An attend must have overlapped the writer this many times, or the test proved nothing.
MIN_OVERLAPPING = 10
# Every this many appends the writer waits (at most HANDSHAKE_TIMEOUT_S) until a reader has
# finished one more attend, so the writer cannot outrun the readers on a fast machine (seen on a
# 16-core host: 4 overlapping attends in a whole run without it) and at least
# N_POSITIONS / HANDSHAKE_EVERY attends overlap it.
HANDSHAKE_EVERY = 64
HANDSHAKE_TIMEOUT_S = 10.0
# The GIL is handed between threads every this many seconds (Python's default is 5 ms), so the
# writer and the readers interleave at almost every call instead of in long turns.
SWITCH_INTERVAL_S = 1e-6


@pytest.fixture(autouse=True)
def fast_thread_switching():
    saved = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    yield
    sys.setswitchinterval(saved)


def growing_plane(max_context=N_POSITIONS):
    return ladder.Plane(ladder.PlaneConfig("growing", n_kv_heads=N_KV, head_dim=HEAD_DIM, capacity=8,
                                           max_context=max_context))


@pytest.mark.parametrize("route", ["splitk", "interleaved"])
def test_attend_while_another_thread_grows_the_same_plane(rng, route):
    ks = rng.standard_normal((N_POSITIONS, N_KV, HEAD_DIM)).astype(np.float32)
    vs = rng.standard_normal((N_POSITIONS, N_KV, HEAD_DIM)).astype(np.float32)
    q = rng.standard_normal((N_HEADS, HEAD_DIM)).astype(np.float32)
    plane = growing_plane()
    plane.append_row(0, ks[0], vs[0])

    done = threading.Event()
    results = []  # (position, out, writer still running when the attend returned)
    refused = []
    failures = []
    attended = threading.Condition()
    attends_done = [0]

    def writer():
        try:
            for pos in range(1, N_POSITIONS):
                plane.append_row(pos, ks[pos], vs[pos])
                if pos % HANDSHAKE_EVERY == 0:
                    with attended:
                        seen = attends_done[0]
                        attended.wait_for(lambda: attends_done[0] > seen, timeout=HANDSHAKE_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 -- reported by the main thread
            failures.append(e)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                pos = plane.next_position - 1
                out = np.full((N_HEADS, HEAD_DIM), np.nan, dtype=np.float32)
                try:
                    # attend stores this token's row itself: the same values the writer stored.
                    ladder.attend(route, plane, pos, pos, q, ks[pos], vs[pos], out=out)
                except ladder.PositionError:
                    # The writer appended between reading next_position and this call: refused,
                    # as the contract says, with the plane untouched.
                    refused.append(pos)
                    continue
                results.append((pos, out, not done.is_set()))
                with attended:
                    attends_done[0] += 1
                    attended.notify_all()
        except Exception as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not failures, failures
    assert plane.len == N_POSITIONS and plane.next_position == N_POSITIONS
    overlapping = sum(1 for _, _, during in results if during)
    assert overlapping >= MIN_OVERLAPPING, (overlapping, len(results), len(refused))

    # Every attend saw exactly the plane its position names: rows 0..pos, nothing freed or half
    # written. The interleaved route reads the current token from the f32 activations.
    k16, v16 = f16_round(ks), f16_round(vs)
    step = max(1, len(results) // MAX_CHECKED)
    for pos, out, _ in results[::step]:
        k_rows, v_rows = k16[: pos + 1].copy(), v16[: pos + 1].copy()
        if route == "interleaved":
            k_rows[pos], v_rows[pos] = ks[pos], vs[pos]
        ref = reference(q, k_rows, v_rows)
        assert np.isfinite(out).all(), pos
        assert rel_err(out, ref) < TOLERANCE, pos

    # The stored rows are the writer's, in order: serialization lost no append and tore no row.
    k_window, v_window = plane.window_rows()
    np.testing.assert_array_equal(k_window, k16.astype(np.float32))
    np.testing.assert_array_equal(v_window, v16.astype(np.float32))



# A ModelCache (one engine) decoded from several threads at once, each thread its own sequence,
# while another thread adds and removes sequences: the engine's lock serializes the calls, so
# every output is its own sequence's reference and the others' positions never move.
CACHE_WINDOW = 16
CACHE_CLASSES = ["swa", "nope"]
CACHE_THREADS = 4
CACHE_STEPS = 3 * CACHE_WINDOW  # every ring wraps
CHURN_ROUNDS = 200


def test_one_model_cache_decoded_from_several_threads(rng):
    g = ladder.Geometry(n_layers=len(CACHE_CLASSES), n_heads=N_HEADS, n_kv_heads=N_KV, head_dim=HEAD_DIM,
                        window=CACHE_WINDOW, max_context=1024, layer_classes=CACHE_CLASSES)
    cache = ladder.ModelCache(g)
    seqs = [cache.add_sequence() for _ in range(CACHE_THREADS)]
    inputs = {s: rng.standard_normal((CACHE_STEPS, len(CACHE_CLASSES), N_HEADS + 2 * N_KV, HEAD_DIM))
              .astype(np.float32) for s in seqs}
    failures = []

    def decode(seq):
        try:
            hist = [([], []) for _ in CACHE_CLASSES]
            for step in range(CACHE_STEPS):
                for layer, cls in enumerate(CACHE_CLASSES):
                    x = inputs[seq][step, layer]
                    q, k, v = x[:N_HEADS][None], x[N_HEADS:N_HEADS + N_KV][None], x[N_HEADS + N_KV:][None]
                    out = np.full_like(q, np.nan)
                    cache.decode(layer, q, k, v, out=out, seqs=[seq])
                    ks, vs = hist[layer]
                    ks.append(f16_round(k[0]))
                    vs.append(f16_round(v[0]))
                    n = len(ks) if cls == "nope" else min(len(ks), CACHE_WINDOW)
                    err = rel_err(out[0], reference(q[0], np.stack(ks[-n:]), np.stack(vs[-n:])))
                    if not err < TOLERANCE:
                        failures.append((seq, step, layer, err))
        except Exception as e:  # noqa: BLE001  (reported below, with the thread's sequence)
            failures.append((seq, repr(e)))

    def churn():
        try:
            for _ in range(CHURN_ROUNDS):
                cache.remove_sequence(cache.add_sequence())
        except Exception as e:  # noqa: BLE001
            failures.append(("churn", repr(e)))

    threads = [threading.Thread(target=decode, args=(s,)) for s in seqs] + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert cache.sequences == seqs
    assert [cache.length(s, layer) for s in seqs for layer in range(len(CACHE_CLASSES))] == \
        [CACHE_STEPS] * (CACHE_THREADS * len(CACHE_CLASSES))
