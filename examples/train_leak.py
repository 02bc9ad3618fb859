"""Does a trained model exploit MX future leakage? The behavioural test of the future-leakage claim.

    python examples/train_leak.py [--steps 3000] [--json]

The tokens are i.i.d. uniform over a vocabulary of 16: nothing about the next token can be
known from the past, so a causal model's best loss is ln 16 = 2.7726. V is block-quantized
along tokens as MXFP4 (blocks of 32 tokens, one E8M0 scale per block and feature, OCP's floor
rule; what `roundscope leak` and the recipe mxfp4-v do): a block's scale depends on all 32 of
its tokens, so a query can see the later tokens of its own block. Two arms, from the same
weights and batches: leaky (every block quantized) and fixed (the query's own block of V
unquantized, the recipe mxfp4-v-fixed). The rest of the arithmetic is float32: only the leak
differs. Gradients pass the quantization straight through.

Every --eval-every steps, on the same held-out sequences: the parallel loss (the whole sequence
at once, as in training) and the autoregressive loss (each position predicted from its prefix
alone, where the last, partial block's scale sees no later token). At the end the leaky
model's parallel loss is also measured with its attention emulated as the mxfp4-v kernel
computes it (roundscope.torch: BF16 inputs, P and O).

The verdict, fixed before the run: the leak is exploited if the leaky arm's final parallel loss
is below ln 16 - 0.02 and at least 0.02 below its own autoregressive loss, while the fixed
arm's parallel and autoregressive losses agree within 0.01; not exploited if the leaky arm's
parallel loss stays within 0.01 of its autoregressive loss; undecided otherwise."""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
from toy_transformer import ToyTransformer

VOCAB, CONTEXT, BLOCK = 16, 128, 32
E2M1_MAX, E2M1_EMAX = 6.0, 2  # FP4 E2M1: largest value 6 = 1.5 * 2^2


def mxfp4_along_tokens(v: torch.Tensor) -> torch.Tensor:
    """v [..., N, D] quantized to MXFP4 in blocks of 32 tokens per feature and dequantized:
    scale 2^(floor(log2 amax) - 2), elements rounded to E2M1 nearest-even, saturating at 6."""
    n = v.shape[-2]
    pad = -n % BLOCK
    x = F.pad(v, (0, 0, 0, pad)) if pad else v
    blocks = x.unflatten(-2, (x.shape[-2] // BLOCK, BLOCK))
    amax = blocks.abs().amax(dim=-2, keepdim=True)
    exponent = torch.where(amax > 0, torch.floor(torch.log2(amax)) - E2M1_EMAX, torch.full_like(amax, -127.0))
    scale = torch.exp2(exponent.clamp(-127, 127))
    y = (blocks / scale).abs()
    # E2M1's grid: steps of 0.5 below 2, 1 below 4, 2 up to 6; torch.round is nearest-even
    q = torch.where(y < 2, torch.round(y * 2) / 2, torch.where(y < 4, torch.round(y), torch.round(y / 2) * 2))
    q = torch.copysign(q.clamp(max=E2M1_MAX), blocks) * scale
    return q.flatten(-3, -2)[..., :n, :]


def straight_through(v: torch.Tensor) -> torch.Tensor:
    return v + (mxfp4_along_tokens(v) - v).detach()


def leaky_attention(q, k, v, is_causal=True):
    """Every block of V quantized: a query's own block's scale sees that block's later tokens."""
    return F.scaled_dot_product_attention(q, k, straight_through(v), is_causal=is_causal)


def fixed_attention(q, k, v, is_causal=True):
    """The diagonal fix: keys of the query's own block of 32 multiply unquantized V, earlier
    blocks (all in the past) quantized V."""
    n = q.shape[-2]
    i = torch.arange(n)
    causal = i[None, :] <= i[:, None]
    own = (i[None, :] // BLOCK) == (i[:, None] // BLOCK)
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
    return (p * own) @ v + (p * ~own) @ straight_through(v)


def parallel_loss(model, x, y) -> float:
    with torch.no_grad():
        return F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).item()


def autoregressive_loss(model, x, y) -> float:
    """Each position's logits from its prefix alone: no later token exists when it is predicted."""
    with torch.no_grad():
        total = 0.0
        for t in range(x.shape[1]):
            total += F.cross_entropy(model(x[:, :t + 1])[:, -1], y[:, t], reduction="sum").item()
        return total / y.numel()


def emulated_parallel_loss(model, x, y, threads) -> float:
    """The leaky model's parallel loss with its attention the mxfp4-v kernel's, emulated."""
    import roundscope.torch as rst
    kernel = rst.sdpa(recipe="mxfp4-v", threads=threads)
    saved = [b.attention for b in model.blocks]
    try:
        for b in model.blocks:
            b.attention = kernel
        return parallel_loss(model, x, y)
    finally:
        for b, a in zip(model.blocks, saved):
            b.attention = a


def verdict(leaky: dict, fixed: dict) -> str:
    uniform = math.log(VOCAB)
    if abs(fixed["parallel"] - fixed["autoregressive"]) > 0.01:
        return "undecided: the fixed arm's two losses differ"
    if leaky["parallel"] < uniform - 0.02 and leaky["parallel"] < leaky["autoregressive"] - 0.02:
        return "exploited"
    if abs(leaky["parallel"] - leaky["autoregressive"]) <= 0.01:
        return "not exploited"
    return "undecided"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-sequences", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch and emulator threads")
    p.add_argument("--json", action="store_true", help="print the log and the verdict as one JSON object")
    a = p.parse_args(argv)
    if min(a.steps, a.batch, a.eval_every, a.eval_sequences, a.threads) < 1 or not a.lr > 0:
        print("--steps, --batch, --eval-every, --eval-sequences, --threads: at least 1; --lr: above 0",
              file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    held_out = torch.randint(0, VOCAB, (a.eval_sequences, CONTEXT + 1), generator=torch.Generator().manual_seed(7))
    hx, hy = held_out[:, :-1], held_out[:, 1:]
    arms = {"leaky": leaky_attention, "fixed": fixed_attention}
    models, optimizers = {}, {}
    for name, attention in arms.items():
        torch.manual_seed(a.seed)
        models[name] = ToyTransformer(VOCAB, d_model=64, heads=2, layers=2, attention=attention)
        optimizers[name] = torch.optim.AdamW(models[name].parameters(), lr=a.lr, weight_decay=0.0)
    batches = torch.Generator().manual_seed(a.seed + 1)
    log, start = [], time.time()
    for step in range(1, a.steps + 1):
        data = torch.randint(0, VOCAB, (a.batch, CONTEXT + 1), generator=batches)
        x, y = data[:, :-1], data[:, 1:]
        for name, model in models.items():
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
        if step % a.eval_every == 0 or step == a.steps:
            row = {"step": step, "seconds": round(time.time() - start, 1)}
            for name, model in models.items():
                row[name] = {"parallel": parallel_loss(model, hx, hy),
                             "autoregressive": autoregressive_loss(model, hx, hy)}
            log.append(row)
            if not a.json:
                print(f"step {step:5d}: " + "; ".join(
                    f"{n} parallel {row[n]['parallel']:.4f} autoregressive {row[n]['autoregressive']:.4f}"
                    for n in arms) + f" ({row['seconds']:.0f} s)", flush=True)
    final = log[-1]
    result = {"vocab": VOCAB, "uniform_loss": math.log(VOCAB), "log": log,
              "leaky_parallel_emulated": emulated_parallel_loss(models["leaky"], hx, hy, a.threads),
              "verdict": verdict(final["leaky"], final["fixed"])}
    if a.json:
        json.dump(result, sys.stdout)
        print()
    else:
        print(f"ln {VOCAB} = {result['uniform_loss']:.4f}; the leaky model's parallel loss under the emulated "
              f"mxfp4-v kernel: {result['leaky_parallel_emulated']:.4f}")
        print(f"verdict: {result['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
