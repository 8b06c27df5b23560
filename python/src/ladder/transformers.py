"""ladder under a transformers model (transformers 5.x).

Importing this module registers the attention implementation ``"ladder"`` with transformers'
AttentionInterface (and its mask function, sdpa's boolean mask, with AttentionMaskInterface).
A model loaded or switched with ``attn_implementation="ladder"`` decodes through ladder when it
is given a ``LadderCache``::

    import ladder.transformers as lt
    model.set_attn_implementation(lt.NAME)
    cache = lt.LadderCache(model.config)
    model.generate(input_ids, attention_mask=mask, past_key_values=cache, ...)

How a forward goes through it, per layer:
  * the model calls ``cache.update(k, v, layer)``: the cache counts the tokens and hands the new
    rows to the attention function that the same layer calls next (no copy is kept);
  * prompt (more than one query token, empty cache): the rows of the real tokens are written
    to the planes without attention (``ModelCache.prefill``; left padding is read from the
    attention mask's diagonal and skipped), and the prompt's attention runs through torch's
    sdpa, as with ``attn_implementation="sdpa"``;
  * decode (one query token): every sequence of the batch appends its row and attends through
    the ladder's route (``ModelCache.decode``: one engine call per layer for the whole batch), in
    the model's dtype, on the model's device;
  * a later chunk of several tokens goes token by token through the decode path.

Each sequence's planes hold only its real tokens, so a left-padded batch needs no masking in
decode: the padding never reaches a plane, and a sliding layer's window is its sequence's last
``sliding_window`` real tokens (transformers' window counts the same tokens).
"""

import inspect
import math
import threading

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._ladder import InvalidArgumentError, LadderError
from .cache import ModelCache, geometry_from_config

NAME = "ladder"

# The rows a cache layer's update just took, for the attention call of the same layer that
# follows it on the same thread: (ModelCache owner, layer index, tokens held before the update).
_handoff = threading.local()


class _LadderLayer(CacheLayerMixin):
    """One layer of a LadderCache, as transformers sees it: a token count (the padded length the
    model's masks and positions are built from). The rows live in the ModelCache's planes."""

    is_croppable = False
    supports_early_init = False

    def __init__(self, owner, layer, sliding):
        super().__init__()
        self.owner = owner
        self.layer = layer
        self.is_sliding = sliding
        self.seen = 0

    def lazy_initialization(self, key_states, value_states):
        self.device = key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.owner._ensure_batch(key_states)
        _handoff.entry = (self.owner, self.layer, self.seen)
        self.seen += key_states.shape[-2]
        return key_states, value_states

    def get_mask_sizes(self, query_length):
        return self.seen + query_length, 0

    def get_seq_length(self):
        return self.seen

    def get_max_length(self):
        return -1

    def reset(self):
        raise LadderError("a LadderCache cannot be reset in place; create a new one")

    def reorder_cache(self, beam_idx):
        raise LadderError("a LadderCache does not reorder its batch (beam search); use greedy or sampling")

    def crop(self, tokens_to_remove):
        raise LadderError("a LadderCache cannot drop tokens (assisted decoding needs a croppable cache)")

    def batch_repeat_interleave(self, repeats):
        raise LadderError("a LadderCache does not repeat its batch; pass the expanded batch instead")

    def batch_select_indices(self, indices):
        raise LadderError("a LadderCache does not select batch rows; use ModelCache.remove_sequence")


class LadderCache(Cache):
    """The transformers Cache that goes with ``attn_implementation="ladder"``: a ModelCache
    (``ladder.cache``) built from the model's config, one sequence per batch row, created on the
    first forward on the device of the model's tensors.

    config:       the model's config (sliding_window, layer_types, heads, head_dim).
    max_context:  the planes' max context (default: config.max_position_embeddings).
    initial_growing_capacity: first capacity of the growing (global) planes (0: the default).
    """

    def __init__(self, config, max_context=None, initial_growing_capacity=0):
        self.geometry = geometry_from_config(config, max_context)
        self.initial_growing_capacity = initial_growing_capacity
        self.model_cache = None
        layers = [_LadderLayer(self, i, self.geometry.layer_class(i) == "swa")
                  for i in range(self.geometry.n_layers)]
        super().__init__(layers=layers)

    def _ensure_batch(self, key_states):
        """The ModelCache and its sequences, on the first update (key_states: (batch, n_kv, q, d))."""
        batch = key_states.shape[0]
        if self.model_cache is None:
            device = "cuda" if key_states.is_cuda else "cpu"
            self.model_cache = ModelCache(self.geometry, device, self.initial_growing_capacity)
            for _ in range(batch):
                self.model_cache.add_sequence()
        elif len(self.model_cache.sequences) != batch:
            raise InvalidArgumentError(
                "this LadderCache holds %d sequences but the forward has a batch of %d"
                % (len(self.model_cache.sequences), batch))

    @property
    def max_batch_size(self):
        return -1 if self.model_cache is None else len(self.model_cache.sequences)


def cache_argument(model, cache):
    """The keyword argument that hands `cache` to `model`'s forward and generate: ``cache`` where
    the installed transformers names it so (5.24 on), ``past_key_values`` before."""
    params = inspect.signature(model.forward).parameters
    return {"cache": cache} if "cache" in params else {"past_key_values": cache}


def _real_rows(attention_mask, batch, length, device):
    """Which of the prompt's rows are real tokens, (batch, length) bool. A token attends to itself
    unless it is padding, so the 4D mask's diagonal says (bool: True attends; float: 0 attends)."""
    if attention_mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    diagonal = attention_mask[:, 0, :, -length:].diagonal(dim1=-2, dim2=-1)
    if diagonal.dtype == torch.bool:
        return diagonal.expand(batch, length)
    return (diagonal == 0).expand(batch, length)


def _prefill(cache, layer, key, value, attention_mask):
    """Writes each sequence's real prompt rows, row r of every sequence in one engine call
    (ModelCache.prefill_batch); key, value: (batch, n_kv, length, head_dim)."""
    batch, _, length, _ = key.shape
    real = _real_rows(attention_mask, batch, length, key.device)
    # (n_kv, rows, head_dim) -> (rows, n_kv, head_dim): the planes take token rows; the sequences'
    # real rows one after another.
    k = torch.cat([key[i][:, real[i]].transpose(0, 1) for i in range(batch)])
    v = torch.cat([value[i][:, real[i]].transpose(0, 1) for i in range(batch)])
    counts = real.sum(dim=1).tolist()
    cache.prefill_batch(layer, cache.sequences, counts, k, v)


def _decode(cache, layer, query, key, value, scaling):
    """One token per sequence: query (batch, n_heads, 1, head_dim), key/value (batch, n_kv, 1,
    head_dim). Returns (batch, 1, n_heads, head_dim), the layout attention outputs have."""
    head_dim = query.shape[-1]
    q = query[:, :, 0, :]
    library_scale = 1.0 / math.sqrt(head_dim)
    if scaling is not None and not math.isclose(scaling, library_scale, rel_tol=1e-6):
        # The routes scale by 1/sqrt(head_dim); a model with another scale folds the ratio into q.
        q = q * (scaling / library_scale)
    q = q if q.is_contiguous() else q.contiguous()
    k = key[:, :, 0, :]
    v = value[:, :, 0, :]
    k = k if k.is_contiguous() else k.contiguous()
    v = v if v.is_contiguous() else v.contiguous()
    out = torch.empty(query.shape[0], 1, query.shape[1], head_dim, dtype=query.dtype, device=query.device)
    cache.decode(layer, q, k, v, out=out[:, 0])
    return out


def ladder_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """The attention function registered as ``"ladder"`` (AttentionInterface's signature):
    query (batch, n_heads, q_len, head_dim), key/value (batch, n_kv, q_len, head_dim) as the
    LadderCache's update returned them. Returns ((batch, q_len, n_heads, head_dim), None)."""
    entry = getattr(_handoff, "entry", None)
    _handoff.entry = None
    layer = getattr(module, "layer_idx", None)
    if entry is None or entry[1] != layer:
        if query.shape[2] == 1:
            raise LadderError(
                "attn_implementation='ladder' decodes from a LadderCache: pass "
                "past_key_values=ladder.transformers.LadderCache(model.config) to generate or forward")
        # No ladder cache (a forward without a cache, e.g. scoring a whole sequence): sdpa.
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    owner, layer, held = entry
    cache = owner.model_cache
    q_len = query.shape[2]
    if q_len > 1 and held == 0:
        _prefill(cache, layer, key, value, attention_mask)
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    outs = [_decode(cache, layer, query[:, :, t:t + 1], key[:, :, t:t + 1], value[:, :, t:t + 1], scaling)
            for t in range(q_len)]
    return (outs[0] if q_len == 1 else torch.cat(outs, dim=1)), None


AttentionInterface.register(NAME, ladder_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)
