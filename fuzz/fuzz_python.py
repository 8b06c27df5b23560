"""atheris target fuzz_python: the Python API (ladder.PlaneConfig, Plane, attend, choose_route,
route_refusal) driven with numpy arrays, checked against a float64 numpy reference written here.

Input: a 13-byte header (layout in read_setup and fuzz/make_corpus.py), then operations.
Checked after each one:
  * a config is the library's to judge: PlaneConfig/Plane either work or raise ladder.LadderError;
  * a refused append (repeated, skipped, negative, past max context, beyond int32) or a call with
    a bad array (wrong shape or dtype, non-contiguous, big-endian, read-only) raises
    ladder.LadderError and leaves plane.state as it was; any other exception is a finding;
  * an append at the next position below max context is accepted;
  * attend through the ladder's route ('auto') runs; a named route either runs or raises
    ladder.RouteError, exactly when route_refusal() names a reason; every output matches the
    float64 reference over the float16-rounded rows (relative error < 2e-3, SPEC P3; the
    interleaved route reads the current token in float32);
  * plane.window_rows() gives back every visible token's K and V exactly (float16-rounded).

Run through scripts/fuzz.sh (which installs atheris and the module into build-fuzz/python-venv):
    scripts/fuzz.sh 60 fuzz_python
"""
import sys

import numpy as np

import atheris

with atheris.instrument_imports(include=["ladder"]):
    import ladder

MAX_CONTEXT = 600
GQA = [1, 2, 4, 8]
ROUTES = ["vec", "splitk", "interleaved", "staged", "auto"]
REL_TOL = 2e-3  # SPEC P3 bound for f16 KV; |q| <= 2 and |k| < 1 keep f32 rounding far inside it
OP_COUNT = 8
REFUSED_KINDS = 7
HOSTILE_KINDS = 6


class Bytes:
    """Reads the input front to back; past the end every read is 0."""

    def __init__(self, data):
        self.data = data
        self.i = 0

    def empty(self):
        return self.i >= len(self.data)

    def next(self):
        if self.i >= len(self.data):
            return 0
        self.i += 1
        return self.data[self.i - 1]

    def u16(self):
        return self.next() | self.next() << 8

    def u32(self):
        return self.u16() | self.u16() << 16


class Finding(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise Finding(what)


def reference(q, k_rows, v_rows, n_kv_heads):
    """float64 attention of q (n_heads, d) over k_rows, v_rows (visible, n_kv_heads, d)."""
    n_heads, d = q.shape
    per_kv = n_heads // n_kv_heads
    out = np.empty((n_heads, d))
    for h in range(n_heads):
        kv = h // per_kv
        scores = k_rows[:, kv, :] @ q[h].astype(np.float64) / np.sqrt(d)
        w = np.exp(scores - scores.max())
        out[h] = (w @ v_rows[:, kv, :]) / w.sum()
    return out


def f16(x):
    return x.astype(np.float16).astype(np.float64)


class PlaneFuzz:
    def __init__(self, cfg, plane, n_heads, rng):
        self.cfg = cfg
        self.plane = plane
        self.n_heads = n_heads
        self.rng = rng
        self.window = cfg.window
        self.max_context = cfg.max_context
        self.row_shape = (cfg.n_kv_heads, cfg.head_dim)
        self.history = {}  # position -> (k, v) float32 as written

    def rows(self, n=None):
        shape = self.row_shape if n is None else (n,) + self.row_shape
        k = self.rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        v = self.rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        return k, v

    def next_position(self):
        return self.plane.next_position

    def append_row(self):
        pos = self.next_position()
        k, v = self.rows()
        if pos >= self.max_context:
            self.refused(lambda: self.plane.append_row(pos, k, v))
            return
        self.plane.append_row(pos, k, v)
        self.history[pos] = (k, v)

    def extend(self, n):
        pos = self.next_position()
        k, v = self.rows(n)
        if pos + n > self.max_context:
            self.refused(lambda: self.plane.extend(k, v))
            return
        self.plane.extend(k, v)
        for i in range(n):
            self.history[pos + i] = (k[i], v[i])

    def refused(self, call, pending=()):
        before = self.plane.state
        try:
            call()
        except (ladder.LadderError,) + pending:
            pass
        else:
            raise Finding("a call that must be refused was accepted")
        check(self.plane.state == before, "a refused call changed the plane state")

    def refused_position(self, kind):
        nxt = self.next_position()
        pos = [nxt - 1, nxt + 2, self.max_context + 3, -1, 2**31, -(2**31) - 1, 2**63][kind]
        if pos == nxt:
            return
        self.refused(lambda: self.plane.append(pos), ())

    def hostile(self, kind):
        """A bad array to append_row: must raise LadderError and change nothing."""
        pos = self.next_position()
        k, v = self.rows()
        if kind == 0:
            k = k[:, :-1] if k.shape[1] > 1 else np.zeros((k.shape[0] + 1, 1), np.float32)
        elif kind == 1:
            k = k.astype(np.float64)
        elif kind == 2:
            k = np.repeat(k, 2, axis=1)[:, ::2]  # right shape, not contiguous
        elif kind == 3:
            k = k.astype(">f4")  # big-endian
        elif kind == 4:
            k.setflags(write=False)  # read-only: an input, so accepting it is also correct
        else:
            k = k.reshape(-1)  # flattened
        if kind == 4 and pos < self.max_context:
            self.plane.append_row(pos, k, v)
            self.history[pos] = (k, v)
            return
        self.refused(lambda: self.plane.append_row(pos, k, v), ())

    def attend(self, route):
        pos = self.next_position()
        if pos >= self.max_context:
            self.refused(lambda: self.plane.append(pos))
            return
        slot = self.plane.append(pos)
        k, v = self.rows()
        q = self.rng.uniform(-2.0, 2.0, (self.n_heads, self.cfg.head_dim)).astype(np.float32)
        refusal = "" if route == "auto" else ladder.route_refusal(route, self.plane)
        before = self.plane.state
        try:
            out = ladder.attend(route, self.plane, pos, slot, q, k, v)
        except ladder.RouteError:
            check(refusal != "", f"route {route} raised RouteError but route_refusal names no reason")
            check(self.plane.state == before, "a refused route changed the plane state")
            self.plane.write_row(slot, k, v)
            self.history[pos] = (k, v)
            return
        except ladder.LadderError:
            # Only a head shape the kernels cannot run (head_dim not a multiple of 4) may refuse here.
            check(self.cfg.head_dim % 4 != 0, f"route {route} refused a valid call")
            check(self.plane.state == before, "a refused attend changed the plane state")
            self.plane.write_row(slot, k, v)
            self.history[pos] = (k, v)
            return
        check(refusal == "", f"route {route} ran although route_refusal says: {refusal}")
        self.history[pos] = (k, v)
        chosen = route
        if route == "auto":
            chosen, _ = ladder.choose_route(self.plane.layer_class, self.plane.state)
        visible = min(pos + 1, self.window) if self.window > 0 else pos + 1
        first = pos + 1 - visible
        ks = np.stack([self.history[t][0] for t in range(first, pos + 1)])
        vs = np.stack([self.history[t][1] for t in range(first, pos + 1)])
        kd, vd = f16(ks), f16(vs)
        if chosen == "interleaved":  # reads the current token in float32
            kd[-1], vd[-1] = ks[-1], vs[-1]
        ref = reference(q, kd, vd, self.cfg.n_kv_heads)
        check(np.all(np.isfinite(out)), f"route {chosen}: non-finite output from finite inputs")
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        check(err < REL_TOL, f"route {chosen} at position {pos}: relative error {err} (bound {REL_TOL})")
        wk, wv = self.plane.window_rows()
        check(np.array_equal(wk, f16(ks).astype(np.float32)) and np.array_equal(wv, f16(vs).astype(np.float32)),
              "window_rows() does not give back the written K and V")

    def consistent_routes(self):
        if self.plane.len == 0:
            return
        chosen, _ = ladder.choose_route(self.plane.layer_class, self.plane.state)
        check(ladder.route_refusal(chosen, self.plane) == "", f"the ladder's route {chosen} is refused")


def read_setup(data):
    """Header: [0] flags: bit0 growing, bit1 unbounded window, bit2 head_dim + 2 [1] n_kv_heads-1
    (mod 3) [2] GQA index [3] head_dim/4-1 (mod 16) [4-5] max_context-1 (mod 600)
    [6-7] window-1 or initial capacity-1 [8] ring slack (mod 40) [9-12] numpy seed."""
    flags = data.next()
    n_kv = 1 + data.next() % 3
    n_heads = n_kv * GQA[data.next() % len(GQA)]
    head_dim = 4 * (1 + data.next() % 16) + (2 if flags & 4 else 0)
    max_context = 1 + data.u16() % MAX_CONTEXT
    span = 1 + data.u16() % (max_context + 32)
    slack = data.next() % 40
    seed = data.u32()
    if flags & 1:
        args = ("growing", n_kv, head_dim, span, max_context, 0)
    elif flags & 2:
        args = ("ring", n_kv, head_dim, max_context + slack, max_context, 0)
    else:
        args = ("ring", n_kv, head_dim, span + slack, max_context, span)
    return args, n_heads, seed


def test_one_input(raw):
    data = Bytes(raw)
    args, n_heads, seed = read_setup(data)
    try:
        cfg = ladder.PlaneConfig(*args)
        plane = ladder.Plane(cfg)
    except ladder.LadderError:
        return
    f = PlaneFuzz(cfg, plane, n_heads, np.random.default_rng(seed))
    while not data.empty():
        op = data.next() % OP_COUNT
        if op == 0:
            f.append_row()
        elif op == 1:
            f.extend(1 + data.next() % 64)
        elif op in (2, 3, 4):
            f.attend(ROUTES[data.next() % len(ROUTES)])
        elif op == 5:
            f.refused_position(data.next() % REFUSED_KINDS)
        elif op == 6:
            f.hostile(data.next() % HOSTILE_KINDS)
        else:
            f.consistent_routes()


def instrument_harness():
    """The harness's own branches guide the fuzzer too (ladder's are instrumented on import)."""
    for name, fn in list(vars(PlaneFuzz).items()):
        if callable(fn):
            setattr(PlaneFuzz, name, atheris.instrument_func(fn))
    return atheris.instrument_func(test_one_input)


def main():
    atheris.Setup(sys.argv, instrument_harness())
    atheris.Fuzz()


if __name__ == "__main__":
    main()
