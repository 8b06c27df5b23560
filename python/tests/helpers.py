"""Shared helpers of the Python tests: random rows, the f64 reference, filled planes."""
import numpy as np


def random_rows(rng, n_kv_heads, head_dim):
    """One token's K and V activations: random normal, never zeros (zeros hide indexing bugs)."""
    k = rng.standard_normal((n_kv_heads, head_dim)).astype(np.float32)
    v = rng.standard_normal((n_kv_heads, head_dim)).astype(np.float32)
    return k, v


def f16_round(x):
    """What a plane stores: round to nearest even f16, read back exactly."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


def reference(q, k_rows, v_rows):
    """The f64 oracle: softmax(q k^T / sqrt(d)) v per query head, max subtracted, GQA mapping
    kv_head = head // (n_heads // n_kv_heads). k_rows, v_rows: (visible, n_kv_heads, head_dim)."""
    q = np.asarray(q, dtype=np.float64)
    n_heads, head_dim = q.shape
    n_kv = k_rows.shape[1]
    group = n_heads // n_kv
    out = np.empty((n_heads, head_dim))
    for h in range(n_heads):
        kv = h // group
        s = k_rows[:, kv, :] @ q[h] / np.sqrt(head_dim)
        w = np.exp(s - s.max())
        out[h] = (w / w.sum()) @ v_rows[:, kv, :]
    return out


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


class Filled:
    """A plane driven through positions 0..last-1 with random rows, plus the history a reference
    needs: the f16-rounded rows of every position in logical order."""

    def __init__(self, plane, rng, last):
        cfg = plane.config
        self.plane = plane
        self.rng = rng
        self.cfg = cfg
        self.k_hist = []
        self.v_hist = []
        for pos in range(last):
            k, v = random_rows(rng, cfg.n_kv_heads, cfg.head_dim)
            plane.append_row(pos, k, v)
            self.k_hist.append(f16_round(k))
            self.v_hist.append(f16_round(v))

    def window(self, position, cur_k, cur_v):
        """The rows a reference attends to at `position` given this token's stored K/V."""
        window = self.cfg.window
        visible = min(position + 1, window) if window > 0 else position + 1
        first = position + 1 - visible
        ks = self.k_hist[first:position] + [cur_k]
        vs = self.v_hist[first:position] + [cur_v]
        return np.stack(ks), np.stack(vs)

