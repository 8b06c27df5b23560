"""Greedy decoding of a transformers model with eager attention and with ladder, side by side:
tokens per second for each and whether they chose the same tokens.

    pip install "./python[transformers]"
    python examples/decode_transformers.py                       # random Qwen3, CPU, float32
    python examples/decode_transformers.py --device cuda --dtype bfloat16 --batch 8 --tokens 256
    python examples/decode_transformers.py --model <name or path>  # a model you have locally

Without --model it builds a small random-weight Qwen3 from a config (no download) with
sliding-window and full-attention layers alternating. Timings include the prompt (prefill),
which both runs do the same way (ladder runs the prompt's attention through sdpa).
"""
import argparse
import time

import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

import ladder
import ladder.transformers as lt


def random_model(args):
    layer_types = ["sliding_attention", "full_attention"] * (args.layers // 2)
    cfg = Qwen3Config(vocab_size=32000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=len(layer_types),
                      num_attention_heads=16, num_key_value_heads=2, head_dim=128, max_position_embeddings=8192,
                      use_sliding_window=True, sliding_window=args.window, layer_types=layer_types, pad_token_id=0,
                      bos_token_id=1, eos_token_id=None)
    torch.manual_seed(0)
    return Qwen3ForCausalLM(cfg)


def decode(model, impl, ids, mask, tokens, cache=None):
    model.set_attn_implementation(impl)
    extra = {} if cache is None else lt.cache_argument(model, cache)
    if ids.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                             **extra)
    if ids.is_cuda:
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a transformers causal LM name or path (default: a random Qwen3)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens per sequence")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per sequence")
    p.add_argument("--layers", type=int, default=8, help="layers of the random model")
    p.add_argument("--window", type=int, default=128, help="sliding window of the random model")
    p.add_argument("--reference", default="eager", help="the attention implementation to compare with")
    args = p.parse_args()

    model = AutoModelForCausalLM.from_pretrained(args.model) if args.model else random_model(args)
    model = model.to(device=args.device, dtype=getattr(torch, args.dtype)).eval()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, vocab, (args.batch, args.prompt), generator=g).to(args.device)
    mask = torch.ones_like(ids)

    print(f"ladder {ladder.__version__}; {type(model).__name__}, {model.config.num_hidden_layers} layers, "
          f"{args.dtype} on {args.device}; batch {args.batch}, prompt {args.prompt}, {args.tokens} new tokens")
    decode(model, args.reference, ids, mask, 2)  # warm-up (allocations, kernels)
    ref, ref_s = decode(model, args.reference, ids, mask, args.tokens)
    decode(model, lt.NAME, ids, mask, 2, lt.LadderCache(model.config))
    got, got_s = decode(model, lt.NAME, ids, mask, args.tokens, lt.LadderCache(model.config))
    generated = args.batch * args.tokens
    print(f"{args.reference:>8}: {generated / ref_s:9.1f} tokens/s ({ref_s:.2f} s)")
    print(f"{'ladder':>8}: {generated / got_s:9.1f} tokens/s ({got_s:.2f} s)")
    new_ref, new_got = ref[:, args.prompt:], got[:, args.prompt:]
    same = (new_ref == new_got).all(dim=1)
    first = [int((r != s).nonzero()[0]) if not ok else None for r, s, ok in zip(new_ref, new_got, same)]
    print("same tokens per sequence:", same.tolist(), "" if same.all() else f"(first difference at {first})")


if __name__ == "__main__":
    main()
