"""ladder under a transformers model: a small random-weight Qwen3 (built here from a config, no
downloads) with sliding-window and global layers (layer_types), head_dim 128, greedy decoding of
110 tokens with a 32-token window, so every ring wraps at least three times; batch 1 and a
left-padded batch of prompts of different lengths.

Two references, both computed in float32 by transformers' own eager attention:
  * eager over float16-rounded K/V in decode steps: the same values the planes hold (every route
    the ladder picks here reads the current token back from the plane too), so ladder differs
    from it only in the order of float32 sums. Greedy tokens must be identical and logits within TIGHT_BOUND.
  * plain eager: ladder's float16 K/V storage is its only approximation; logits of the same
    prefixes (eager teacher-forced on ladder's tokens) must be within KV16_BOUND, and ladder's
    token must be eager's wherever eager's top-two margin exceeds twice that bound (closer
    margins are ties the storage may break either way).
"""
import copy

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable (scripts/test.sh installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not importable (scripts/test.sh installs it)")

import ladder  # noqa: E402
import ladder.transformers as lt  # noqa: E402
from transformers import AttentionInterface, Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: E402
from transformers.models.qwen3.modeling_qwen3 import eager_attention_forward  # noqa: E402

WINDOW = 32
NEW_TOKENS = 110
LAYER_TYPES = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
# f16 rounding of K and V: unit roundoff u = 2^-11 relative. Each layer's attention output moves
# by O(u) relative through the values and through the scores; RMSNorm'd residual layers carry
# that to the logits at the same order: two roundings per layer over 4 layers, 8u of max|logit|.
KV16_BOUND = 8 * 2.0**-11
# Same stored values, float32 sums in another order (ladder's split-K partials, sdpa's prompt
# attention): relative error about (rows + head_dim) * 2^-24 ~ 2e-5 per attention, 4 layers deep.
TIGHT_BOUND = 1e-4


def eager_kv16(module, query, key, value, attention_mask, **kwargs):
    """Eager attention where ladder attends: a decode step (one query token) reads K and V rounded
    to float16, as the planes store them; the prompt reads them unrounded (ladder runs the
    prompt's attention through sdpa over the model's own K/V)."""
    if query.shape[2] == 1:
        key, value = key.half().float(), value.half().float()
    return eager_attention_forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("eager_kv16", eager_kv16)
AttentionMaskInterface.register("eager_kv16", eager_mask)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(20261130)
    cfg = Qwen3Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=len(LAYER_TYPES),
                      num_attention_heads=4, num_key_value_heads=2, head_dim=128, max_position_embeddings=512,
                      use_sliding_window=True, sliding_window=WINDOW, layer_types=LAYER_TYPES, pad_token_id=0,
                      bos_token_id=1, eos_token_id=None)
    return Qwen3ForCausalLM(cfg).eval()


def prompts(lengths, generator):
    """Left-padded prompt ids and mask, (batch, max(lengths))."""
    width = max(lengths)
    ids = torch.randint(2, 512, (len(lengths), width), generator=generator)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :width - n] = 0
        mask[i, width - n:] = 1
    return ids, mask


def generate(model, impl, ids, mask, cache=None):
    model.set_attn_implementation(impl)
    extra = {} if cache is None else lt.cache_argument(model, cache)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, output_logits=True, return_dict_in_generate=True, **extra)
    return out.sequences, torch.stack(out.logits, dim=1)  # (batch, width + new), (batch, new, vocab)


def teacher_forced_eager(model, sequences, mask):
    """Eager logits for every generated step of `sequences` (positions counted over real tokens,
    as generate counts them)."""
    model.set_attn_implementation("eager")
    full_mask = torch.cat([mask, torch.ones(mask.shape[0], NEW_TOKENS, dtype=mask.dtype, device=mask.device)], dim=1)
    positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(sequences, attention_mask=full_mask, position_ids=positions).logits
    width = mask.shape[1]
    return logits[:, width - 1:width - 1 + NEW_TOKENS]


def on_device(model, device):
    """The model on `device` ('cuda' only with a CUDA build of ladder and a GPU)."""
    if device == "cpu":
        return model
    if not (ladder.cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs a CUDA build of ladder and a GPU")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 references stay float32
    return copy.deepcopy(model).to(device)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("lengths", [[9], [5, 17, 29, 12]], ids=["batch1", "batch4-left-padded"])
def test_greedy_decoding_matches_eager(model, lengths, device):
    model = on_device(model, device)
    ids, mask = prompts(lengths, torch.Generator().manual_seed(len(lengths)))
    ids, mask = ids.to(device), mask.to(device)
    cache = lt.LadderCache(model.config)
    got_tokens, got_logits = generate(model, lt.NAME, ids, mask, cache)
    assert got_tokens.shape[1] == ids.shape[1] + NEW_TOKENS

    # Every sequence holds only its real tokens; every ring has wrapped at least twice.
    mc = cache.model_cache
    for seq, n in zip(mc.sequences, lengths):
        for layer, state in enumerate(mc.states(seq)):
            # generate's last token is sampled but never fed back, so NEW_TOKENS - 1 decode steps.
            assert state.next_position == n + NEW_TOKENS - 1
            if LAYER_TYPES[layer] == "sliding_attention":
                assert mc.layer_classes[layer] == "swa" and state.capacity == WINDOW
                assert state.origin_logical >= 2 * WINDOW
            else:
                assert mc.layer_classes[layer] == "nope" and state.len == state.next_position

    ref_tokens, ref_logits = generate(model, "eager_kv16", ids, mask)
    assert torch.equal(got_tokens, ref_tokens)
    scale = ref_logits.abs().max().item()
    assert (got_logits - ref_logits).abs().max().item() <= TIGHT_BOUND * scale

    eager_logits = teacher_forced_eager(model, got_tokens, mask)
    scale = eager_logits.abs().max().item()
    assert (got_logits - eager_logits).abs().max().item() <= KV16_BOUND * scale
    top2 = eager_logits.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 2 * KV16_BOUND * scale
    assert clear.float().mean().item() > 0.5, "too few clear steps for the comparison to mean anything"
    generated = got_tokens[:, ids.shape[1]:]
    assert torch.equal(generated[clear], eager_logits.argmax(-1)[clear])


# A bfloat16 model rounds every activation to bfloat16 (u = 2^-8): eager attention in bfloat16
# lands within about 2u of max|logit| from the float32 computation with the same weights, and
# ladder (float32 inside, q, k, v and the output in bfloat16) must do as well: 4u.
BF16_BOUND = 4 * 2.0**-8


def test_bfloat16_model(model):
    """The model in bfloat16 end to end: ladder reads and writes bfloat16 tensors in place. Its
    logits are compared, on its own tokens (teacher-forced), with float32 eager attention over the
    same bfloat16 weights, and with bfloat16 eager attention's distance to that same reference."""
    lengths = [5, 29]
    ids, mask = prompts(lengths, torch.Generator().manual_seed(11))
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    f32 = copy.deepcopy(bf16).float()  # the same (bfloat16-valued) weights, float32 arithmetic
    tokens, logits = generate(bf16, lt.NAME, ids, mask, lt.LadderCache(bf16.config))
    reference = teacher_forced_eager(f32, tokens, mask).float()
    eager_bf16 = teacher_forced_eager(bf16, tokens, mask).float()
    scale = reference.abs().max().item()
    ladder_err = (logits.float() - reference).abs().max().item()
    eager_err = (eager_bf16 - reference).abs().max().item()
    assert ladder_err <= BF16_BOUND * scale
    assert ladder_err <= 2 * eager_err


def test_prompt_in_chunks(model):
    """A one-token first chunk (decode path on an empty cache), then a chunk of several tokens on
    a cache that holds some (token by token through ladder), then a long one that wraps the
    rings: the last chunk's logits match eager over the whole prompt at once, within the plain
    eager bound (float16 K/V storage)."""
    ids = torch.randint(2, 512, (1, 80), generator=torch.Generator().manual_seed(13))
    model.set_attn_implementation(lt.NAME)
    cache = lt.LadderCache(model.config)
    with torch.no_grad():
        pieces = [model(ids[:, a:b], **lt.cache_argument(model, cache)).logits for a, b in ((0, 1), (1, 12), (12, 80))]
        model.set_attn_implementation("eager")
        reference = model(ids).logits
    got = torch.cat(pieces, dim=1)
    scale = reference.abs().max().item()
    assert (got - reference).abs().max().item() <= KV16_BOUND * scale
    assert cache.model_cache.length(cache.model_cache.sequences[0]) == 80
    assert cache.get_seq_length() == 80


def test_decode_without_a_ladder_cache_says_what_to_pass(model):
    ids = torch.randint(2, 512, (1, 6), generator=torch.Generator().manual_seed(3))
    model.set_attn_implementation(lt.NAME)
    with torch.no_grad():
        # A forward without a cache runs the prompt through sdpa, like attn_implementation="sdpa".
        full = model(ids, use_cache=False).logits
        model.set_attn_implementation("sdpa")
        assert torch.allclose(full, model(ids, use_cache=False).logits, rtol=0, atol=1e-6 * full.abs().max().item())
        model.set_attn_implementation(lt.NAME)
        with pytest.raises(ladder.LadderError, match="past_key_values=ladder.transformers.LadderCache"):
            model.generate(ids, max_new_tokens=2, do_sample=False)


def test_cache_refuses_what_it_cannot_do(model):
    cache = lt.LadderCache(model.config)
    assert cache.is_sliding == [t == "sliding_attention" for t in LAYER_TYPES]
    with pytest.raises(ladder.LadderError, match="cannot drop tokens"):
        cache.crop(1)
    with pytest.raises(ladder.LadderError, match="beam search"):
        cache.reorder_cache(torch.tensor([0]))
    ids, mask = prompts([4, 7], torch.Generator().manual_seed(5))
    model.set_attn_implementation(lt.NAME)
    with torch.no_grad():
        model(ids, attention_mask=mask, **lt.cache_argument(model, cache))
        with pytest.raises(ladder.InvalidArgumentError, match="holds 2 sequences but the forward has a batch of 1"):
            model(ids[:1, -1:], **lt.cache_argument(model, cache))
