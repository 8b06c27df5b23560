#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: fuzz/corpus/<target>/<seed name>.

Each seed is a handful of bytes in the layout its harness reads (the header comments of
fuzz/fuzz_plane.cpp and fuzz/fuzz_engine.cpp; fuzz/fuzz_python.py for the Python target), built
to reach one state the fuzzer would be slow to find alone: a wrapped ring, 4 warps per workgroup
(more than 4096 visible rows), head_dim 256, an unbounded window, every GQA ratio, forced
routes, refusals. Run it after changing a harness's layout and commit the result:

    python3 fuzz/make_corpus.py
"""
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"

# ---- fuzz_plane ------------------------------------------------------------------------------
PLANE_GQA = [1, 2, 3, 4, 8, 16]
PLANE_Q_AMP = [0.25, 0.5, 1.0, 2.0]
PLANE_V_AMP = [1.0, 0.5, 16.0, 1024.0]
ROUTES = {"vec": 0, "splitk": 1, "interleaved": 2, "staged": 3}


def u16(v):
    return struct.pack("<H", v)


def plane_header(kv_heads, gqa, head_dim, nope=False, unbounded=False, odd_head_dim=False, deep=False,
                 q_amp=1.0, v_amp=1.0, max_context=100, span=32, slack=0):
    """span: the ring's window, or the growing plane's initial capacity."""
    flags = (nope * 1) | (unbounded * 2) | (odd_head_dim * 4) | (deep * 8)
    flags |= PLANE_Q_AMP.index(q_amp) << 4 | PLANE_V_AMP.index(v_amp) << 6
    return (bytes([kv_heads - 1, PLANE_GQA.index(gqa), head_dim // 4 - 1, flags]) + u16(max_context - 1)
            + u16(span - 1) + bytes([slack]) + bytes(4))  # no poke


# A poke (LADDER_FUZZ_NONFINITE=1 only; inert otherwise): stream q/k/v, value index into the
# harness's list NaN, +Inf, -Inf, 1e5, -7e4, at (position, element).
POKE_STREAMS = {"q": 0, "k": 1, "v": 2}
POKE_VALUES = {"nan": 0, "inf": 1, "-inf": 2, "1e5": 3, "-7e4": 4}


def poke(stream, value, position, element):
    what = 1 + 2 * POKE_STREAMS[stream] + 6 * POKE_VALUES[value]
    return bytes([what]) + u16(position) + bytes([element])


def with_poke(header, stream, value, position, element, poke_at=9):
    return header[:poke_at] + poke(stream, value, position, element) + header[poke_at + 4:]


def plane_fill(count):
    if count <= 224:
        return bytes([3, count - 1])
    return bytes([3, 255]) + u16(count - 1)


def plane_attend(disable_vec=False, stage=False, strict=False, no_caps=False, force=None):
    how = disable_vec * 1 | stage * 2 | strict * 4 | no_caps * 8
    if force is not None:
        how |= 3 << 4 | ROUTES[force] << 6
    return bytes([4, how])


def plane_refusals():
    # repeated, skipped by 2, past max context, negative, INT32_MAX
    return bytes([0, 1, 1, 2, 0, 7, 2, 1, 3, 2, 2])


ALL_FORCED = b"".join(plane_attend(force=r) for r in ROUTES)

PLANE_SEEDS = {
    "ring_wrapped_gqa4": plane_header(2, 4, 32, max_context=200, span=40, slack=7) + plane_fill(100)
    + plane_attend() + plane_attend(stage=True) + plane_attend(disable_vec=True) + ALL_FORCED,
    "ring_window0_nsg4": plane_header(1, 1, 4, unbounded=True, deep=True, max_context=4500, slack=5)
    + plane_fill(4223) + plane_attend() + plane_attend() + ALL_FORCED,
    "growing_nsg4_pad_tail": plane_header(1, 2, 8, nope=True, deep=True, max_context=4600, span=100)
    + plane_fill(4150) + plane_attend() + plane_attend(disable_vec=True) + plane_attend(no_caps=True, strict=True)
    + ALL_FORCED,
    "ring_hd256_gqa8": plane_header(1, 8, 256, max_context=500, span=64, slack=16, q_amp=2.0, v_amp=16.0)
    + plane_fill(150) + plane_attend() + plane_attend(stage=True) + ALL_FORCED,
    "growing_hd256_deep": plane_header(1, 1, 256, nope=True, deep=True, max_context=8000, span=1)
    + plane_fill(4100) + plane_attend() + plane_attend(disable_vec=True),
    "ring_gqa16_slack": plane_header(2, 16, 16, max_context=400, span=33, slack=31, q_amp=0.25)
    + plane_fill(70) + plane_attend() + plane_attend(stage=True) + plane_fill(20) + plane_attend(),
    "ring_gqa3_staged_full": plane_header(3, 3, 12, max_context=300, span=64, v_amp=1024.0)
    + plane_fill(150) + plane_attend(stage=True) + plane_fill(31) + plane_attend(stage=True) + ALL_FORCED,
    "ring_refusals": plane_header(2, 2, 8, max_context=40, span=16, slack=3) + plane_attend() + plane_refusals()
    + plane_fill(30) + plane_refusals() + plane_attend() + plane_fill(20) + plane_attend() + plane_refusals(),
    "ring_tiny_capacity": plane_header(1, 4, 4, max_context=60, span=5) + plane_fill(9) + ALL_FORCED
    + plane_attend(),
    "growing_tiny_capacity": plane_header(2, 1, 4, nope=True, max_context=80, span=1) + plane_attend()
    + plane_fill(40) + ALL_FORCED + plane_attend(),
    "odd_head_dim_refused": plane_header(1, 2, 8, odd_head_dim=True, max_context=50, span=8) + plane_attend()
    + plane_fill(10) + ALL_FORCED,
    "window_over_max_context": plane_header(1, 1, 8, max_context=20, span=60) + plane_fill(19) + plane_attend(),
    "nonfinite_k_nan": with_poke(plane_header(2, 2, 8, max_context=100, span=40, slack=3), "k", "nan", 20, 9)
    + plane_fill(30) + plane_attend() + plane_fill(30) + plane_attend(),
    "nonfinite_v_inf_growing": with_poke(plane_header(1, 4, 8, nope=True, max_context=100, span=8), "v", "inf", 5, 3)
    + plane_fill(20) + ALL_FORCED,
    "nonfinite_k_beyond_f16": with_poke(plane_header(1, 1, 16, nope=True, max_context=100, span=8), "k", "1e5", 10, 2)
    + plane_fill(10) + ALL_FORCED + plane_attend(),
    "nonfinite_q_nan": with_poke(plane_header(2, 3, 8, max_context=100, span=16), "q", "nan", 12, 17) + plane_fill(12)
    + plane_attend() + plane_attend(),
}

# ---- fuzz_engine -----------------------------------------------------------------------------
ENGINE_GQA = [1, 2, 4, 8]


def engine_header(layers, kv_heads, gqa, head_dim, window=32, max_context=200, slack=0, period=0, phase=0,
                  classes=None, growing_capacity=0, unbounded=False, disable_vec=False, strict=False,
                  stage=False, no_caps=False, env_disable_vec=False, env_strict=False, odd_head_dim=False,
                  deep=False, q_amp=1.0, v_amp=1.0):
    flags = (unbounded * 1 | disable_vec * 2 | strict * 4 | stage * 8 | no_caps * 16 | env_disable_vec * 32
             | env_strict * 64 | odd_head_dim * 128)
    if classes is not None:
        nope, mask = 200, sum(1 << i for i, c in enumerate(classes) if c == "nope")
    else:
        nope, mask = period + 5 * phase, 0
        assert nope < 200 and (period == 0 or phase < period)
    amps = PLANE_Q_AMP.index(q_amp) | PLANE_V_AMP.index(v_amp) << 2 | deep * 16
    return (bytes([layers - 1, kv_heads - 1, ENGINE_GQA.index(gqa), head_dim // 4 - 1, flags]) + u16(max_context - 1)
            + u16(window - 1) + bytes([slack, nope, mask, growing_capacity, amps]) + bytes(4) + bytes([0]))


def engine_fill(count):
    if count == 1:
        return bytes([5])
    if count <= 224:
        return bytes([4, count - 1])
    return bytes([4, 255]) + u16(count - 1)


def encode(n=1):
    return bytes([6]) * n


ENGINE_REFUSALS = bytes([0, 1, 0, 2, 0, 3, 2, 1, 9, 2, 2, 3])
# Sequence operations (fuzz_engine.cpp, kSequenceOps): add a sequence, remove the newest, a
# batched encode of every sequence, the same with the newest sequence's position skipped.
ADD_SEQ, REMOVE_SEQ, BATCH, BATCH_SKIPPED = bytes([240]), bytes([241]), bytes([242]), bytes([243])

ENGINE_SEEDS = {
    "batched_sequences_wrap": engine_header(3, 2, 4, 16, window=40, max_context=300, slack=5, period=3, phase=2,
                                            growing_capacity=4)
    + encode(2) + ADD_SEQ * 3 + BATCH * 20 + BATCH_SKIPPED + engine_fill(30) + BATCH * 50 + REMOVE_SEQ + BATCH * 10
    + ADD_SEQ + BATCH * 45 + BATCH_SKIPPED + encode(2),
    "batched_staged_no_vec": engine_header(2, 1, 8, 8, window=32, max_context=200, slack=3, period=2, stage=True)
    + ADD_SEQ + engine_fill(40) + BATCH * 40 + REMOVE_SEQ + REMOVE_SEQ + ADD_SEQ * 4 + BATCH * 35,
    "glimmer_like_4_layers": engine_header(4, 2, 4, 32, window=48, max_context=280, slack=8, period=4, phase=3)
    + encode(3) + engine_fill(100) + encode(4) + ENGINE_REFUSALS + engine_fill(60) + encode(3),
    "deep_nsg4_window0": engine_header(2, 1, 1, 4, unbounded=True, deep=True, max_context=4400,
                                       classes=["nope", "swa"]) + engine_fill(4200) + encode(3),
    "swa_wrap_env_switches": engine_header(3, 1, 2, 16, window=32, max_context=250, env_disable_vec=True,
                                           env_strict=True, stage=True) + encode(40) + engine_fill(50) + encode(8),
    "no_vec_capability_strict": engine_header(2, 2, 2, 8, window=64, max_context=290, slack=5, period=2,
                                              no_caps=True, strict=True) + engine_fill(63) + encode(3)
    + engine_fill(60) + encode(2),
    "growing_from_one_row": engine_header(2, 1, 8, 8, max_context=200, period=1, growing_capacity=1) + encode(5)
    + engine_fill(40) + encode(3),
    "refusals_and_null_buffers": engine_header(2, 3, 1, 4, window=8, max_context=20, slack=2, period=2, phase=1)
    + ENGINE_REFUSALS + encode(2) + ENGINE_REFUSALS + engine_fill(17) + encode(2) + ENGINE_REFUSALS,
    "six_layers_hd128_gqa8": engine_header(6, 1, 8, 128, window=40, max_context=120, slack=20, period=3, phase=1,
                                           q_amp=2.0, v_amp=1024.0) + engine_fill(70) + encode(4),
    "disable_vec_stage": engine_header(3, 2, 4, 12, window=96, max_context=299, disable_vec=True, stage=True,
                                       period=3) + engine_fill(200) + encode(3),
    "odd_head_dim_refused": engine_header(1, 1, 1, 8, odd_head_dim=True) + encode(2),
    "window_over_max_context": engine_header(2, 1, 2, 8, window=100, max_context=40, period=2) + engine_fill(30)
    + encode(2),
    "nonfinite_k_nan_layer1": with_poke(engine_header(3, 1, 2, 8, window=16, max_context=100, period=3, phase=1),
                                        "k", "nan", 10, 3, poke_at=14)[:-1] + bytes([1]) + engine_fill(10) + encode(3)
    + engine_fill(20) + encode(2),
}


# ---- fuzz_python -----------------------------------------------------------------------------
PY_ROUTES = ["vec", "splitk", "interleaved", "staged", "auto"]


def py_header(kv_heads, gqa, head_dim, growing=False, unbounded=False, odd_head_dim=False, max_context=100,
              span=32, slack=0, seed=1):
    flags = growing * 1 | unbounded * 2 | odd_head_dim * 4
    return (bytes([flags, kv_heads - 1, ENGINE_GQA.index(gqa), head_dim // 4 - 1]) + u16(max_context - 1)
            + u16(span - 1) + bytes([slack]) + struct.pack("<I", seed))


def py_extend(n):
    return b"".join(bytes([1, min(n, 64) - 1]) for n in [64] * (n // 64) + ([n % 64] if n % 64 else []))


def py_attend(*routes):
    return b"".join(bytes([2, PY_ROUTES.index(r)]) for r in routes)


PY_EVERY_ROUTE = py_attend(*PY_ROUTES)
PY_REFUSALS = b"".join(bytes([5, kind]) for kind in range(7)) + b"".join(bytes([6, kind]) for kind in range(6))

PYTHON_SEEDS = {
    "ring_wrapped": py_header(2, 4, 16, max_context=300, span=40, slack=9) + py_extend(100) + PY_EVERY_ROUTE
    + bytes([7]) + py_extend(20) + PY_EVERY_ROUTE,
    "ring_full_blocks": py_header(1, 2, 8, max_context=200, span=64) + py_extend(127) + PY_EVERY_ROUTE,
    "ring_window0": py_header(1, 8, 4, unbounded=True, max_context=500, slack=3) + py_extend(300) + PY_EVERY_ROUTE,
    "growing_from_one_row": py_header(3, 1, 12, growing=True, max_context=200, span=1) + PY_EVERY_ROUTE
    + py_extend(40) + PY_EVERY_ROUTE,
    "refusals_and_bad_arrays": py_header(2, 2, 8, max_context=20, span=8, slack=2) + PY_REFUSALS + bytes([0])
    + PY_EVERY_ROUTE + py_extend(15) + PY_REFUSALS + py_extend(3),
    "odd_head_dim": py_header(1, 1, 8, odd_head_dim=True, max_context=50, span=16) + bytes([0, 0])
    + PY_EVERY_ROUTE,
}


def write(target, seeds):
    folder = ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        # regression_* seeds are inputs a fuzzer found, kept as they were: not generated here.
        if not old.name.startswith("regression_"):
            old.unlink()
    for name, data in seeds.items():
        (folder / name).write_bytes(data)
    print(f"{target}: {len(seeds)} seeds in {folder}")


if __name__ == "__main__":
    write("fuzz_plane", PLANE_SEEDS)
    write("fuzz_engine", ENGINE_SEEDS)
    write("fuzz_python", PYTHON_SEEDS)
