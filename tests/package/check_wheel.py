"""The built wheel, installed on its own (pip install --target SITE), imported in a clean process
started outside the source tree (scripts/test.sh runs it): the module comes from SITE, reports the
project() version in ladder.__version__ and in its metadata, and one decode attention over a
wrapped ring matches numpy's f64 computation.

    python check_wheel.py SITE VERSION
"""
import importlib.metadata
import pathlib
import sys

import numpy as np

# f32 arithmetic over a 2048-row window of f16-stored rows (the f64 side reads the same f16
# values): errors are ~1e-6; the library's bound for every route (P3) is 2e-3.
RELATIVE_BOUND = 2e-3
# The README's example: a sliding-window layer of the default geometry, filled past its window
# so the ring wraps, then one token attended at the next position.
FILLED = 3000


def main(site, version):
    site = pathlib.Path(site).resolve()
    # The wheel's folder first on the path, as an installed site-packages would be.
    sys.path.insert(0, str(site))
    import ladder

    where = pathlib.Path(ladder.__file__).resolve()
    if site not in where.parents:
        sys.exit("ladder was imported from %s, not from the installed wheel in %s" % (where, site))
    if ladder.__version__ != version or importlib.metadata.version("ladder") != version:
        sys.exit("version: module %s, metadata %s, project %s" % (
            ladder.__version__, importlib.metadata.version("ladder"), version))

    g = ladder.Geometry.muse_glimmer()
    plane = ladder.Plane.for_layer(g, "swa")
    rng = np.random.default_rng(20261201)
    shape = (FILLED, g.n_kv_heads, g.head_dim)
    k_rows = rng.standard_normal(shape, dtype=np.float32)
    v_rows = rng.standard_normal(shape, dtype=np.float32)
    plane.extend(k_rows, v_rows)
    slot = plane.append(FILLED)
    q = rng.standard_normal((g.n_heads, g.head_dim), dtype=np.float32)
    k = rng.standard_normal((g.n_kv_heads, g.head_dim), dtype=np.float32)
    v = rng.standard_normal((g.n_kv_heads, g.head_dim), dtype=np.float32)
    out = np.full((g.n_heads, g.head_dim), np.nan, dtype=np.float32)  # poisoned
    ladder.attend("auto", plane, FILLED, slot, q, k, v, out=out)

    # numpy f64: the window's rows as the plane stores them (f16), softmax(q k^T / sqrt(d)) v.
    first = FILLED + 1 - g.window
    keys = np.concatenate([k_rows[first:], k[None]]).astype(np.float16).astype(np.float64)
    values = np.concatenate([v_rows[first:], v[None]]).astype(np.float16).astype(np.float64)
    group = g.n_heads // g.n_kv_heads
    ref = np.empty((g.n_heads, g.head_dim))
    for h in range(g.n_heads):
        scores = keys[:, h // group, :] @ q[h].astype(np.float64) / np.sqrt(g.head_dim)
        weights = np.exp(scores - scores.max())
        ref[h] = weights / weights.sum() @ values[:, h // group, :]
    err = float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))
    if not err <= RELATIVE_BOUND:  # a NaN left in `out` fails here too
        sys.exit("attend vs numpy f64: relative error %g over the bound %g" % (err, RELATIVE_BOUND))
    print("wheel: ladder %s from %s (CUDA build: %s); attend over a wrapped ring vs numpy f64: "
          "relative error %.2e (bound %g)" % (ladder.__version__, where.parent, ladder.has_cuda_build(), err,
                                              RELATIVE_BOUND))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
