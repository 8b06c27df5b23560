"""A whole-model KV cache: every layer's planes for a batch of sequences.

The cache is one ``ladder.Engine`` (the library's engine, include/ladder/engine.hpp): each
sequence of the engine has one plane per layer (a ring for a sliding-window layer, a growing
plane for a global one), on the host or, in a CUDA build, in device memory, and keeps each
layer's own next position. The cache adds what a model forward needs: prefill (the prompt's K/V
rows written without attention), decode (append and attend at one layer for every sequence of
the batch, one engine call) and sequences joining and leaving the batch.

Shapes at the boundary (arrays in float32, float16 or bfloat16; numpy or torch; CPU, or CUDA
tensors for device planes):
  prefill: k, v  (rows, n_kv_heads, head_dim)            one sequence, one layer
  decode:  q     (batch, n_heads, head_dim)              one token per sequence, one layer
           k, v  (batch, n_kv_heads, head_dim)
           out   (batch, n_heads, head_dim)              written in place
"""

import operator

from . import _ladder
from ._ladder import Geometry, InvalidArgumentError, UnsupportedError

# transformers' layer_types names and the library's layer classes.
_LAYER_CLASS = {"sliding_attention": "swa", "full_attention": "nope"}


def geometry_from_config(config, max_context=None, name=None, kv_dtype="f16"):
    """A ladder Geometry from a transformers-style config (read by attribute, so any object with
    the same fields works): num_hidden_layers, num_attention_heads, num_key_value_heads,
    head_dim (or hidden_size // num_attention_heads), sliding_window, layer_types, and
    max_position_embeddings (unless ``max_context`` is given).

    A layer named 'sliding_attention' gets a ring plane of ``sliding_window`` rows, one named
    'full_attention' a growing plane. Without layer_types, every layer slides when
    sliding_window is set and none does otherwise. Other layer types (chunked, linear, ...)
    raise UnsupportedError. ``kv_dtype`` ('f16' or 'bf16') is the KV planes' element type.
    """
    n_layers = int(config.num_hidden_layers)
    n_heads = int(config.num_attention_heads)
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    head_dim = getattr(config, "head_dim", None) or int(config.hidden_size) // n_heads
    window = getattr(config, "sliding_window", None) or 0
    layer_types = getattr(config, "layer_types", None)
    if layer_types is None:
        layer_types = ["sliding_attention" if window else "full_attention"] * n_layers
    classes = []
    for i, kind in enumerate(layer_types):
        if kind not in _LAYER_CLASS:
            raise UnsupportedError(
                "layer %d is a %r layer; ladder keeps 'sliding_attention' (ring) and 'full_attention' "
                "(growing) layers only" % (i, kind))
        classes.append(_LAYER_CLASS[kind])
    if "swa" in classes and not window:
        raise InvalidArgumentError("layer_types has sliding_attention layers but sliding_window is not set")
    if max_context is None:
        max_context = int(getattr(config, "max_position_embeddings"))
    return Geometry(n_layers=n_layers, n_heads=n_heads, n_kv_heads=int(n_kv), head_dim=int(head_dim),
                    window=int(window), max_context=int(max_context), layer_classes=classes,
                    name=name or getattr(config, "model_type", None) or "custom", kv_dtype=kv_dtype)


class ModelCache:
    """Every layer's planes for a batch of sequences (see the module docstring), held by one
    ``ladder.Engine``: the library's engine and its planes on the host or the GPU.

    geometry:  a ladder.Geometry (its layer classes pick ring or growing planes), or use
               ``ModelCache.from_config`` for a transformers config.
    device:    'cpu' (host planes) or 'cuda' (device planes, CUDA builds: NoDeviceError otherwise).
    initial_growing_capacity: first capacity of the growing planes (0: the library's default).
    kv_dtype:  the planes' element type, 'f16' or 'bf16'; None keeps the geometry's (f16 unless
               it says otherwise).

    Threads: like the engine, one call at a time per cache (docs/threads.md).
    """

    def __init__(self, geometry, device="cpu", initial_growing_capacity=0, kv_dtype=None):
        if kv_dtype is not None:
            geometry = geometry.with_kv_dtype(kv_dtype)
        geometry.validate()
        self.geometry = geometry
        self.initial_growing_capacity = initial_growing_capacity
        self.layer_classes = [geometry.layer_class(i) for i in range(geometry.n_layers)]
        self._engine = _ladder.Engine(geometry, device, initial_growing_capacity)
        self.device = self._engine.device

    @classmethod
    def from_config(cls, config, device="cpu", max_context=None, initial_growing_capacity=0, kv_dtype="f16"):
        """From a transformers config (``geometry_from_config``)."""
        return cls(geometry_from_config(config, max_context, kv_dtype=kv_dtype), device, initial_growing_capacity)

    # ---- sequences ---------------------------------------------------------------------------
    @property
    def n_layers(self):
        return self.geometry.n_layers

    @property
    def engine(self):
        """The ``ladder.Engine`` that holds the planes (read it; calls made on it directly bypass
        the cache's argument checks but not the engine's)."""
        return self._engine

    @property
    def sequences(self):
        """The sequence ids in batch order (the order decode reads its batch rows in): the order
        they were added, which is increasing (the engine never reuses an id)."""
        return self._engine.sequences

    def add_sequence(self):
        """A new, empty sequence at the end of the batch; returns its id."""
        return self._engine.add_sequence()

    def remove_sequence(self, seq):
        """Drops a sequence and its planes; the others keep their order."""
        self._engine.remove_sequence(self._sequence(seq))

    def state(self, seq, layer):
        """The PlaneState of one layer of a sequence (capacity, len, origins, next_position)."""
        return self._engine.state(self._sequence(seq), self._layer(layer))

    def states(self, seq):
        """The sequence's plane states, one per layer (read-only copies)."""
        seq = self._sequence(seq)
        return [self._engine.state(seq, layer) for layer in range(self.n_layers)]

    def length(self, seq, layer=0):
        """Tokens the sequence holds at a layer (its next position)."""
        return self.state(seq, layer).next_position

    # ---- writes --------------------------------------------------------------------------------
    def prefill(self, seq, layer, k, v):
        """Writes a prompt's rows at the sequence's next positions of one layer, without
        attention: k, v (rows, n_kv_heads, head_dim). One engine call (``Engine::fill_layer_rows``;
        a batch of prompts goes faster through ``prefill_batch``). All or nothing: every argument
        (sequence, layer, dtypes, shapes, the position range against the max context), N1's
        opt-in check of every row (``LADDER_CHECK_FINITE=1``) and a growing plane's growth for
        all the rows are settled before the first row, so a refused call or an out_of_memory
        changes nothing. Returns each row's slot."""
        return self._engine.fill_rows(self._layer(layer), self._sequence(seq), k, v, _ladder._writer_stream(None, k))

    def prefill_batch(self, layer, seqs, counts, k, v):
        """The prompts of several sequences at one layer, as ``prefill`` for each but with row r
        of every sequence in one engine call (max(counts) calls instead of sum(counts)): k, v
        (sum(counts), n_kv_heads, head_dim), the sequences' rows one after another, counts[i]
        rows for seqs[i] (distinct ids). All or nothing like ``prefill``. Returns each sequence's
        slots."""
        seqs = [self._sequence(s) for s in seqs]
        return self._engine.fill_batch(self._layer(layer), seqs, counts, k, v, _ladder._writer_stream(None, k))

    def decode(self, layer, q, k, v, out=None, seqs=None):
        """One token for every sequence of the batch at one layer: appends it at each sequence's
        next position and attends through the route the ladder picks, in ONE engine call
        (``Engine.encode_layer``) for the whole batch.

        q (batch, n_heads, head_dim); k, v (batch, n_kv_heads, head_dim); out like q (allocated
        in q's dtype when None). seqs: the sequence ids the batch rows belong to (default: all,
        in batch order). All or nothing: every array and every sequence's next append is
        checked before the first append, so a refused call leaves every plane untouched.
        Returns out."""
        layer = self._layer(layer)
        seqs = self.sequences if seqs is None else [self._sequence(s) for s in seqs]
        if out is None:
            out = _ladder_new_output(q)
        for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
            shape = tuple(getattr(x, "shape", ()))
            if len(shape) != 3 or shape[0] != len(seqs):
                raise _ladder.ShapeError(
                    "%s must have shape (batch, heads, head_dim) with batch = %d sequences, got %s"
                    % (name, len(seqs), shape))
        self._engine.encode_layer(layer, seqs, q, k, v, out, _ladder._writer_stream(None, q))
        return out

    # ---- lookups -------------------------------------------------------------------------------
    def _sequence(self, seq):
        if seq not in self._engine.sequences:
            raise InvalidArgumentError("sequence %r is not in this cache (sequences: %s)" % (seq, self.sequences))
        return seq

    def _layer(self, layer):
        try:
            layer = operator.index(layer)
        except TypeError:
            raise InvalidArgumentError("layer must be an integer, got %r" % (layer,)) from None
        if not 0 <= layer < self.n_layers:
            raise InvalidArgumentError("layer %r does not exist (0..%d)" % (layer, self.n_layers - 1))
        return layer

    def __repr__(self):
        return "ModelCache(%s, device=%r, sequences=%s)" % (self.geometry.name, self.device,
                                                          {s: self.length(s) for s in self.sequences})


def _ladder_new_output(q):
    from . import _new_output

    return _new_output(q)
