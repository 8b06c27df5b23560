#!/usr/bin/env python3
"""CPU peer comparison (issue 11): ladder beside PyTorch's CPU scaled_dot_product_attention and
llama.cpp's CPU flash attention (ggml_flash_attn_ext, f16 K/V) on the same decode shapes, the
same machine, the same run.

Shapes: batch 1, one query token, 32 query heads over 2 KV heads, head_dim 128, depths 2048,
8192, 32768, 131072. Every peer is checked against an f64 reference on its own data first
(relative error under 2e-3, outputs poisoned first), then timed: K/V sets rotated so that they
total >= 4x the last-level cache (as `ladder bench` does), median of --reps calls after warm-ups,
wall clock.

ladder's rows come from `ladder bench --device cpu --json` files (--ladder-json, one per thread
count); llama.cpp's from bench/cpu_ggml_fa (built by bench/cpu_peers.sh). Writes cpu_peers.json
and cpu_peers.txt (one table, ladder beside the peers) into --out.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

N_HEADS, N_KV_HEADS, HEAD_DIM = 32, 2, 128
DEPTHS = [2048, 8192, 32768, 131072]
TOLERANCE = 2e-3          # P3's bound, the one ladder's routes meet
ROTATE_FACTOR = 4
MAX_SETS = 64
WARMUPS = 2
FALLBACK_LLC = 64 << 20
# ladder's default route per layer class at depth D: a growing (NoPE) plane takes vec, a
# wrapped ring (SWA) splitk.
LADDER_CASES = ["vec/growing", "splitk/ring"]


def llc_bytes():
    try:
        return os.sysconf("SC_LEVEL3_CACHE_SIZE") or FALLBACK_LLC
    except (ValueError, OSError):
        return FALLBACK_LLC


def torch_peer(torch, depth, dtype, reps):
    """PyTorch SDPA on the CPU: q [1, 32, 1, 128], k/v [1, 2, L, 128] in `dtype`, GQA through
    enable_gqa. Returns (median_us, min_us, max_us, rel_err, sets)."""
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(depth)
    set_bytes = 2 * depth * N_KV_HEADS * HEAD_DIM * torch.tensor([], dtype=dtype).element_size()
    sets = max(1, min(MAX_SETS, math.ceil(ROTATE_FACTOR * llc_bytes() / set_bytes)))
    q = (torch.rand(1, N_HEADS, 1, HEAD_DIM, generator=gen) * 2 - 1).to(dtype)
    kv = [((torch.rand(1, N_KV_HEADS, depth, HEAD_DIM, generator=gen) * 2 - 1).to(dtype),
           (torch.rand(1, N_KV_HEADS, depth, HEAD_DIM, generator=gen) * 2 - 1).to(dtype)) for _ in range(sets)]

    def call(i):
        k, v = kv[i % sets]
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    try:
        call(0)
    except TypeError:  # torch before 2.5 has no enable_gqa: K/V expanded to 32 heads, untimed
        group = N_HEADS // N_KV_HEADS
        kv = [(k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)) for k, v in kv]

        def call(i):
            k, v = kv[i % sets]
            return F.scaled_dot_product_attention(q, k, v)

    out = torch.full((1, N_HEADS, 1, HEAD_DIM), float("nan"), dtype=dtype)
    out.copy_(call(0))
    k, v = kv[0]
    k, v = k[:, ::k.shape[1] // N_KV_HEADS], v[:, ::v.shape[1] // N_KV_HEADS]  # one row per KV head
    # f64 reference per KV group (query heads 16g..16g+15 share KV head g), without copying K/V
    # 16 times: q as [1, 2, 16, 128] against k as [1, 2, L, 128].
    group = N_HEADS // N_KV_HEADS
    qd = q.double().reshape(1, N_KV_HEADS, group, HEAD_DIM)
    w = torch.softmax((qd @ k.double().transpose(-1, -2)) / math.sqrt(HEAD_DIM), dim=-1)
    ref = (w @ v.double()).reshape(1, N_HEADS, 1, HEAD_DIM)
    err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    ts = []
    for r in range(WARMUPS + reps):
        t0 = time.perf_counter()
        call(r)
        t1 = time.perf_counter()
        if r >= WARMUPS:
            ts.append((t1 - t0) * 1e6)
    ts.sort()
    return ts[len(ts) // 2], ts[0], ts[-1], err, sets


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--depths", default=",".join(map(str, DEPTHS)))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--ggml-driver", help="bench/cpu_ggml_fa built by cpu_peers.sh (skipped when absent)")
    ap.add_argument("--ladder-json", action="append", default=[], help="`ladder bench --json` output (repeatable)")
    ap.add_argument("--torch-dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    depths = [int(x) for x in a.depths.split(",")]
    os.makedirs(a.out, exist_ok=True)
    rows, notes = [], []

    for path in a.ladder_json:
        with open(path) as f:
            rep = json.load(f)
        for r in rep["rows"]:
            if r["kind"] == "layer" and r["name"] in LADDER_CASES and r["depth"] in depths:
                rows.append({"peer": f"ladder {r['name']}", "threads": rep["threads"], "depth": r["depth"],
                             "median_us": r["median_us"], "min_us": r["min_us"], "max_us": r["max_us"],
                             "fraction_of_roofline": r.get("fraction_of_roofline"),
                             "ok": "NON-FINITE" not in r.get("note", ""), "rel_err": None,
                             "note": r.get("note", "")})
        notes.append(f"ladder: {rep['device_name']}, {rep['date']}; ceilings read {rep['ceiling']['read_gb_per_s']:.1f} "
                     f"GB/s, FMA {rep['ceiling'].get('fma_g_per_s', 0):.1f} GFMA/s")

    try:
        import torch
        torch.set_num_threads(a.threads)
        notes.append(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
        for dtype_name in a.torch_dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            for d in depths:
                try:
                    med, lo, hi, err, sets = torch_peer(torch, d, dtype, a.reps)
                    rows.append({"peer": f"torch sdpa {dtype_name}", "threads": a.threads, "depth": d,
                                 "median_us": med, "min_us": lo, "max_us": hi, "rel_err": err,
                                 "within_bound": err < TOLERANCE, "ok": math.isfinite(err), "sets": sets})
                except Exception as e:  # a dtype the CPU kernels refuse is reported, not fatal
                    rows.append({"peer": f"torch sdpa {dtype_name}", "threads": a.threads, "depth": d,
                                 "median_us": None, "ok": False, "note": f"{type(e).__name__}: {e}"[:200]})
                print(f"cpu_peers: torch {dtype_name} depth {d} done", file=sys.stderr, flush=True)
    except ImportError as e:
        notes.append(f"torch not importable: {e}")

    if a.ggml_driver and os.path.exists(a.ggml_driver):
        p = subprocess.run([a.ggml_driver, "--threads", str(a.threads), "--depths", a.depths, "--reps", str(a.reps)],
                           capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                row["ok"] = math.isfinite(row["rel_err"])
                rows.append(row)
        if p.returncode != 0:
            notes.append(f"llama.cpp driver exit {p.returncode}: {p.stderr[-500:]}")
        notes.append("llama.cpp: ggml from the llama-cpp-python source package, CPU backend, AVX2/FMA/F16C "
                     "(GGML_NATIVE off, the ISA ladder is built for), its own thread pool")
    else:
        notes.append("llama.cpp driver not given or not built: no llama.cpp rows")

    with open(os.path.join(a.out, "cpu_peers.json"), "w") as f:
        json.dump({"threads": a.threads, "depths": depths, "rows": rows, "notes": notes}, f, indent=2)
    lines = [f"CPU decode attention, batch 1, 32:2 heads, head_dim 128, f16 KV (torch rows in their dtype), "
             f"{a.threads} threads; median us (min-max), eN: relative error vs f64 (ladder's: see its tests, "
             f"< {TOLERANCE:g})"]
    peers = sorted({(r["peer"], r["threads"]) for r in rows}, key=lambda x: (x[1], x[0]))
    lines.append(f"{'peer':34s} {'thr':>3s} " + " ".join(f"{d:>22d}" for d in depths))
    for peer, thr in peers:
        cells = []
        for d in depths:
            m = [r for r in rows if r["peer"] == peer and r["threads"] == thr and r["depth"] == d]
            if not m or m[0].get("median_us") is None:
                cells.append(f"{'-':>22s}")
                continue
            r = m[0]
            err = f" e{r['rel_err']:.0e}" if r.get("rel_err") is not None else ""
            cells.append(f"{r['median_us']:>9.1f} ({r['min_us']:.0f}-{r['max_us']:.0f}){err}".rjust(22))
        lines.append(f"{peer:34s} {thr:>3d} " + " ".join(cells))
    lines += [f"note: {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "cpu_peers.txt"), "w") as f:
        f.write(text)
    print(text)
    # A peer above P3's error bound is reported (within_bound false), not fatal; a ladder row with
    # a non-finite output or a peer that produced a non-finite error is.
    return 0 if all(r.get("ok", True) for r in rows if r.get("median_us") is not None) else 1


if __name__ == "__main__":
    sys.exit(main())
