"""The CPU device's worker pool from Python: its size, the default (one per usable CPU) and the
errors for counts it cannot take."""

import os

import pytest

import ladder

REASONS = ("online CPUs", "the process's CPU affinity", "the cgroup's CPU quota")


def test_usable_cpus_is_the_default_and_within_the_process_mask():
    count, limited_by = ladder.usable_cpus()
    assert limited_by in REASONS
    assert 1 <= count <= (os.cpu_count() or count)
    if hasattr(os, "sched_getaffinity"):
        assert count <= len(os.sched_getaffinity(0))
    before = ladder.cpu_threads()
    try:
        ladder.set_cpu_threads(1)
        assert ladder.cpu_threads() == 1
        ladder.set_cpu_threads(0)
        assert ladder.cpu_threads() == count
    finally:
        ladder.set_cpu_threads(before)


def test_a_decode_on_one_worker_matches_the_default_pool_bit_for_bit():
    import numpy as np

    # 1,100 tokens: 18 chunks of 64, five splits per KV head, ten producer tasks.
    g = ladder.Geometry(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, window=64, max_context=2048)
    rng = np.random.default_rng(11)

    def decode(threads):
        before = ladder.cpu_threads()
        ladder.set_cpu_threads(threads)
        try:
            plane = ladder.Plane.for_layer(g, "nope")
            out = None
            for pos in range(tokens):
                k = kv[pos]
                v = kv[pos][::-1].copy()
                slot = plane.append(pos)
                out = ladder.attend("vec", plane, pos, slot, q, k, v)
            return np.asarray(out)
        finally:
            ladder.set_cpu_threads(before)

    q = rng.standard_normal((g.n_heads, g.head_dim), dtype=np.float32)
    tokens = 1100
    kv = rng.standard_normal((tokens, g.n_kv_heads, g.head_dim), dtype=np.float32)
    one, default = decode(1), decode(0)
    assert np.array_equal(one.view(np.uint32), default.view(np.uint32))


def test_counts_the_pool_cannot_take_are_refused():
    before = ladder.cpu_threads()
    with pytest.raises(ladder.InvalidArgumentError, match="0..1024"):
        ladder.set_cpu_threads(-1)
    with pytest.raises(ladder.InvalidArgumentError, match="0..1024"):
        ladder.set_cpu_threads(1025)
    with pytest.raises(ladder.InvalidArgumentError):
        ladder.set_cpu_threads("two")
    with pytest.raises(ladder.InvalidArgumentError):
        ladder.set_cpu_threads(2**40)
    assert ladder.cpu_threads() == before
