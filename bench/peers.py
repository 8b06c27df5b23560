#!/usr/bin/env python3
"""Peer comparison (SPEC B2): ladder beside PyTorch SDPA (cuDNN and flash backends),
FlexAttention and FlashInfer on the same decode shapes, in one process on one GPU.

Shapes: batch 1 and 16, 32 query heads over 2 KV heads, head_dim 128, f16 KV, depths 2048,
8192, 32768, 131072. Every peer is first checked against an f64 reference on the same data
(relative error under 2e-3, outputs poisoned first), then timed: a CUDA graph holds one call
per rotated buffer set (sets total >= 4x L2, as in `ladder bench`), replays are timed with
events, time per call = replay time / sets, median over replays.

ladder's times come from `ladder bench --json` (--ladder-json), which runs the same protocol;
ladder is also checked on this script's data through the Python module when it is importable.

Writes peers.json and peers.png (bench/plot.py: time and fraction of ceiling vs depth) into --out.
"""
import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch

N_HEADS, N_KV_HEADS, HEAD_DIM = 32, 2, 128
DEPTHS = [2048, 8192, 32768, 131072]
BATCHES = [1, 16]
TOLERANCE = 2e-3          # P3's bound, the same one ladder's routes meet
ROTATE_FACTOR = 4         # rotated buffers total >= 4x L2
MAX_SETS = 256
WARMUP_REPLAYS = 3
# The ladder route compared against: a growing (NoPE) plane at depth D takes vec.
LADDER_REFERENCE_CASE = "vec/growing"


def kv_bytes(batch, depth):
    """The fewest bytes one decode call must move: K and V read once, q read, out written."""
    return batch * (depth * N_KV_HEADS * HEAD_DIM * 2 * 2 + 2 * N_HEADS * HEAD_DIM * 2)


def median_event_us(run, reps, warmup):
    """Median time of run() in microseconds: `warmup` untimed calls, then `reps` calls each
    between two CUDA events."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return float(np.median(ts))


def measure_ceiling():
    """Device copy (bytes read + written) and a read-only reduction, 1 GiB each; the higher wins."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    as_f32 = src.view(torch.float32)

    copy_us = median_event_us(lambda: dst.copy_(src), reps=20, warmup=3)
    read_us = median_event_us(lambda: torch.sum(as_f32), reps=20, warmup=3)
    copy = 2 * n / (copy_us * 1e3)
    read = n / (read_us * 1e3)
    del src, dst
    torch.cuda.empty_cache()
    return {"copy_gb_per_s": copy, "read_gb_per_s": read, "ceiling_gb_per_s": max(copy, read),
            "source": "copy" if copy > read else "read (torch.sum)"}


def reference(q, k, v):
    """f64 attention with the GQA mapping kv_head = head // 16. q (B, H, 1, D); k, v (B, KV, L, D)."""
    group = N_HEADS // N_KV_HEADS
    qd = q.double().view(q.shape[0], N_KV_HEADS, group, HEAD_DIM)
    s = torch.einsum("bkgd,bkld->bkgl", qd, k.double()) / math.sqrt(HEAD_DIM)
    w = torch.softmax(s, dim=-1)
    o = torch.einsum("bkgl,bkld->bkgd", w, v.double())
    return o.reshape(q.shape[0], N_HEADS, 1, HEAD_DIM)


def rel_err(out, ref):
    out = out.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def make_sets(batch, depth, sets, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    data = []
    for _ in range(sets):
        q = torch.randn(batch, N_HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.float16, generator=g)
        k = torch.randn(batch, N_KV_HEADS, depth, HEAD_DIM, device="cuda", dtype=torch.float16, generator=g)
        v = torch.randn(batch, N_KV_HEADS, depth, HEAD_DIM, device="cuda", dtype=torch.float16, generator=g)
        data.append((q, k, v))
    return data


def time_calls(fn, data, reps):
    """One CUDA graph with fn over every set; replays timed with events; per-call median (us).
    Falls back to an eager loop (events around it) when the call cannot be captured."""
    outs = [None] * len(data)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i, d in enumerate(data):
            outs[i] = fn(*d)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    mode = "graph"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i, d in enumerate(data):
                outs[i] = fn(*d)
        run = graph.replay
    except Exception as e:  # capture refused: time eager launches instead, and say so
        mode = "eager (graph capture failed: %s)" % str(e).splitlines()[0][:120]
        torch.cuda.synchronize()

        def run():
            for d in data:
                fn(*d)
    return median_event_us(run, reps, WARMUP_REPLAYS) / len(data), mode


# ---- peers -----------------------------------------------------------------------------------

def sdpa_peer(backend_name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend_name]

    def call_gqa(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    # GQA is asked of the backend itself (enable_gqa): expanding K/V to 32 heads would copy
    # them and move 16x the bytes, a different problem. A backend that refuses says why.
    return [("enable_gqa", call_gqa)]


def flex_peer():
    from torch.nn.attention.flex_attention import flex_attention

    compiled = torch.compile(flex_attention, dynamic=False)

    def call(q, k, v):
        return compiled(q, k, v, enable_gqa=True)

    return [("compiled", call)]


# Why FlashInfer is usually absent on the GPU machine (checked 2026-11-30): the only build on
# PyPI for Python 3.12 is flashinfer-python 0.7.4 (py3-none-any, kernels JIT-compiled on first
# use), a 101 MB wheel, over the 64 MiB a device call can carry; it also needs apache-tvm-ffi,
# cuda-tile, nvidia-cutlass-dsl, nvidia-cudnn-frontend and nccl4py, which that image lacks, and
# its package imports ~240 names eagerly (the cute-DSL modules among them).
FLASHINFER_ABSENT = ("flashinfer-python 0.7.4, the only PyPI build for Python 3.12, is a 101 MB wheel "
                     "(over the 64 MiB a device call carries) and needs apache-tvm-ffi, cuda-tile, "
                     "nvidia-cutlass-dsl, nvidia-cudnn-frontend and nccl4py, absent on this machine")


def flashinfer_peer():
    try:
        import flashinfer
    except ImportError as e:
        raise ImportError("%s (%s)" % (e, FLASHINFER_ABSENT)) from e

    def call(q, k, v):
        # single_decode_with_kv_cache: q (H, D), k/v (L, KV, D) in the NHD layout; batch via a loop
        # would not be one launch, so FlashInfer runs batch 1 only here.
        return flashinfer.single_decode_with_kv_cache(q[0, :, 0], k[0].transpose(0, 1), v[0].transpose(0, 1))

    return [("single_decode", call)]


def run_peer(name, variants, shapes, reps, seed, budget_s, log):
    """Check then time each variant on each shape; the first variant that passes the check on a
    shape is the one timed there. Returns result rows."""
    rows = []
    start = time.time()
    for batch, depth in shapes:
        if time.time() - start > budget_s:
            rows.append({"peer": name, "batch": batch, "depth": depth, "status": "skipped",
                         "reason": "time budget of %ds for this peer spent" % budget_s})
            continue
        per_set = kv_bytes(batch, depth)
        sets = max(1, min(MAX_SETS, math.ceil(ROTATE_FACTOR * L2_BYTES / per_set)))
        row = {"peer": name, "batch": batch, "depth": depth, "sets": sets, "bytes": kv_bytes(batch, depth)}
        try:
            data = make_sets(batch, depth, sets, seed + depth + batch)
        except torch.OutOfMemoryError as e:
            row.update(status="skipped", reason="out of memory: " + str(e).splitlines()[0])
            rows.append(row)
            continue
        q, k, v = data[0]
        ref = reference(q, k, v)
        failures = []
        for variant, fn in variants:
            if name == "flashinfer" and batch != 1:
                failures.append("batch %d: single_decode is per sequence" % batch)
                break
            try:
                out = fn(q, k, v)
                torch.cuda.synchronize()
                out = out.reshape(ref.shape)
                err = rel_err(out, ref)
                if not (err < TOLERANCE):
                    failures.append("%s: relative error %.3g >= %g" % (variant, err, TOLERANCE))
                    continue
                us, mode = time_calls(fn, data, reps)
                row.update(status="ok", variant=variant, rel_err=err, median_us=us, timing=mode)
                break
            except Exception as e:
                failures.append("%s: %s: %s" % (variant, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else ""))
                torch.cuda.synchronize()
        if row.get("status") != "ok":
            row.update(status="failed", reason="; ".join(failures))
        log("%-10s batch %2d depth %6d: %s" % (name, batch, depth,
            "%.2f us (%s, %s, err %.1e)" % (row["median_us"], row["variant"], row["timing"], row["rel_err"])
            if row["status"] == "ok" else row["status"] + ": " + row.get("reason", "")))
        rows.append(row)
        del data, q, k, v, ref
        torch.cuda.empty_cache()
    return rows


def check_ladder(shapes, seed, log):
    """ladder on this script's data through the Python module: vec on a growing device plane."""
    try:
        import ladder
    except ImportError as e:
        return [{"peer": "ladder-check", "status": "skipped", "reason": "Python module not importable: %s" % e}]
    rows = []
    for batch, depth in shapes:
        if batch != 1:
            continue
        q, k, v = make_sets(1, depth, 1, seed + depth + 1)[0]
        ref = reference(q, k, v)
        cfg = ladder.PlaneConfig("growing", n_kv_heads=N_KV_HEADS, head_dim=HEAD_DIM, capacity=depth,
                                 max_context=depth)
        plane = ladder.Plane(cfg, device="cuda", n_heads=N_HEADS)
        rows_k = k[0].transpose(0, 1).float().cpu().numpy()  # (L, KV, D)
        rows_v = v[0].transpose(0, 1).float().cpu().numpy()
        plane.extend(np.ascontiguousarray(rows_k[:-1]), np.ascontiguousarray(rows_v[:-1]))
        slot = plane.append(depth - 1)
        out = torch.full((N_HEADS, HEAD_DIM), float("nan"), device="cuda")
        qf = q[0, :, 0].float().contiguous()
        ladder.attend("vec", plane, depth - 1, slot, qf, k[0, :, -1].float().contiguous(),
                      v[0, :, -1].float().contiguous(), out=out)
        err = rel_err(out.view(1, N_HEADS, 1, HEAD_DIM), ref)
        ok = err < TOLERANCE
        rows.append({"peer": "ladder-check", "batch": 1, "depth": depth, "rel_err": err,
                     "status": "ok" if ok else "failed"})
        log("ladder     batch  1 depth %6d: vec/growing on this data, rel err %.1e %s" % (depth, err,
            "" if ok else "FAILED"))
    return rows


def ladder_rows(path):
    if not path or not os.path.exists(path):
        return None, {}
    with open(path) as f:
        report = json.load(f)
    layer = {}  # (batch, depth) -> {case: median us}
    for r in report["rows"]:
        if r["kind"] == "layer":
            layer.setdefault((1, r["depth"]), {})[r["name"]] = r["median_us"]
        elif r["kind"] == "layer-batch":  # one layer over a batch, GPU time (ladder bench --batch)
            layer.setdefault((r["batch"], r["depth"]), {})[r["name"]] = r["median_us"]
    return report, layer


def reference_case(batch):
    """The ladder row a peer's x_ladder ratio divides by."""
    return LADDER_REFERENCE_CASE if batch == 1 else "nope (growing) layer, batch %d" % batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ladder-json", help="output of `ladder bench --json` from the same device")
    ap.add_argument("--out", default=".", help="folder for peers.json and peers.png")
    ap.add_argument("--depths", default=",".join(map(str, DEPTHS)))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--peers", default="cudnn,flash,flex,flashinfer")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--flex-budget", type=int, default=150, help="seconds FlexAttention may spend (compiles)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--ladder-check-only", action="store_true",
                    help="only check ladder (Python module) on this script's data; writes ladder_check.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("peers.py: no CUDA device; nothing to compare", file=sys.stderr)
        return 2

    def log(s):
        print(s, file=sys.stderr, flush=True)

    global L2_BYTES
    props = torch.cuda.get_device_properties(0)
    L2_BYTES = props.L2_cache_size
    depths = [int(x) for x in args.depths.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    shapes = [(b, d) for b in batches for d in depths]
    os.makedirs(args.out, exist_ok=True)

    if args.ladder_check_only:
        rows = check_ladder(shapes, args.seed, log)
        with open(os.path.join(args.out, "ladder_check.json"), "w") as f:
            json.dump(rows, f, indent=2)
        for r in rows:
            print("ladder check: " + json.dumps(r))
        return 0 if all(r["status"] == "ok" for r in rows) else 1

    ceiling = measure_ceiling()
    log("ceiling: copy %.0f GB/s, read %.0f GB/s" % (ceiling["copy_gb_per_s"], ceiling["read_gb_per_s"]))
    ladder_report, ladder_layer = ladder_rows(args.ladder_json)
    # One ceiling for every ratio: ladder's own (CUDA-event probes in the same device call) when
    # present, else the torch probes here.
    ceil_gbps = ladder_report["ceiling"]["ceiling_gb_per_s"] if ladder_report else ceiling["ceiling_gb_per_s"]

    results = check_ladder(shapes, args.seed, log)
    unavailable = {}
    for peer in args.peers.split(","):
        try:
            if peer in ("cudnn", "flash"):
                variants = sdpa_peer(peer)
                budget = 10 ** 6
            elif peer == "flex":
                variants = flex_peer()
                budget = args.flex_budget
            elif peer == "flashinfer":
                variants = flashinfer_peer()
                budget = 10 ** 6
            else:
                raise ValueError("unknown peer %r" % peer)
        except Exception as e:
            reason = "%s: %s" % (type(e).__name__, e)
            unavailable[peer] = reason
            log("%-10s unavailable: %s" % (peer, reason))
            continue
        name = {"cudnn": "sdpa-cudnn", "flash": "sdpa-flash"}.get(peer, peer)
        try:
            results += run_peer(name, variants, shapes, args.reps, args.seed, budget, log)
        except Exception:
            unavailable[peer] = traceback.format_exc().splitlines()[-1]
            log("%-10s failed: %s" % (peer, unavailable[peer]))

    # ---- the table ----
    print("peers on %s, %s UTC; ceiling %.0f GB/s; floor = bytes / ceiling" % (
        torch.cuda.get_device_name(), datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        ceil_gbps))
    print("%-24s %5s %7s %9s %10s %8s %9s" % ("who", "batch", "depth", "floor_us", "median_us", "of_ceil",
                                              "x_ladder"))
    table = []
    for batch, depth in shapes:
        floor_us = kv_bytes(batch, depth) / (ceil_gbps * 1e3)
        lad = ladder_layer.get((batch, depth), {}).get(reference_case(batch))
        entries = []
        for case, us in sorted(ladder_layer.get((batch, depth), {}).items()):
            entries.append(("ladder " + case, us))
        for r in results:
            if r["peer"] != "ladder-check" and r["batch"] == batch and r["depth"] == depth:
                entries.append((r["peer"], r["median_us"] if r["status"] == "ok" else None, r))
        for e in entries:
            who, us = e[0], e[1]
            if us is None:
                line = "%-24s %5d %7d %9.2f %10s  %s" % (who, batch, depth, floor_us, "-", e[2]["status"] + ": " +
                                                        e[2].get("reason", "")[:80])
                table.append({"who": who, "batch": batch, "depth": depth, "floor_us": floor_us,
                              "status": e[2]["status"], "reason": e[2].get("reason", "")})
            else:
                frac = floor_us / us
                ratio = us / lad if lad else None
                line = "%-24s %5d %7d %9.2f %10.2f %8.3f %9s" % (who, batch, depth, floor_us, us, frac,
                                                                 "%.2f" % ratio if ratio else "-")
                table.append({"who": who, "batch": batch, "depth": depth, "floor_us": floor_us, "median_us": us,
                              "fraction_of_ceiling": frac, "ratio_to_ladder": ratio})
            print(line)
    if any(b != 1 for b in batches):
        print("note: ladder's batch > 1 rows are one layer through Engine::encode over the batch, activations "
              "in device memory, GPU time by CUDA events (the step-state fetch, N1's count kernel, the route's "
              "kernels); not rotated, so below ~32768 the planes may sit in L2")
    for peer, reason in unavailable.items():
        print("note: %s not measured: %s" % (peer, reason))

    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "ceiling_gb_per_s": ceil_gbps, "torch_ceiling": ceiling, "ladder_reference_case": LADDER_REFERENCE_CASE,
           "rows": table, "raw": results, "unavailable": unavailable,
           "cudnn_version": torch.backends.cudnn.version()}
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump(out, f, indent=2)
    # The plot is bench/plot.py's (beside this script): ladder's routes and the peers, per depth.
    try:
        import plot as layer_plot
        layer_plot.draw(ladder_report, out, os.path.join(args.out, "peers.png"), batches,
                        args.ladder_json or "bench.json", "peers.json")
    except Exception as e:
        print("note: no plot: %s" % e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
