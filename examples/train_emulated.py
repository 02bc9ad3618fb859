"""A small transformer trained on the CPU with its attention computed, forward and backward, as a
low-precision kernel computes it (roundscope.torch), against the same model with exact attention.

    .venv/bin/python examples/train_emulated.py [--steps 300] [--recipes fa2-bf16 fa3-fp8]

Every run starts from the same weights and sees the same batches; the only difference is the
attention kernel's arithmetic. Each step logs the loss of every run and one analysis of that
run's first attention layer: the fraction of P that an FP8 kernel's E4M3 cast of P (S = 1,
forward KV order) flushes to zero on this step's q, k (roundscope.pcollapse, the P-collapse
of docs/findings.md), with the first key as the sink. The text learned is the Python standard
library's own sources as bytes (nothing is downloaded). 2 layers, d_model 64, 2 heads (D = 32),
context 64, batch 8.
"""
import argparse
import json
import pathlib
import sys
import time

import torch
import torch.nn.functional as F
from toy_transformer import ToyTransformer

import roundscope
import roundscope.torch as rst

CONTEXT, D_MODEL, HEADS, LAYERS, VOCAB, BATCH = 64, 64, 2, 2, 256, 8


def corpus(limit=1 << 20):
    """The first `limit` bytes of the standard library's .py files, in sorted order."""
    root = pathlib.Path(json.__file__).resolve().parent.parent
    data = bytearray()
    for path in sorted(root.glob("*.py")):
        data += path.read_bytes()
        if len(data) >= limit:
            break
    return torch.tensor(list(data[:limit]), dtype=torch.long)


class Recorded:
    """An attention function that keeps the q, k, v of its last call (for the P-collapse log)."""

    def __init__(self, attention):
        self.attention, self.last_qkv = attention, None

    def __call__(self, q, k, v, is_causal):
        self.last_qkv = (q.detach(), k.detach(), v.detach())
        return self.attention(q, k, v, is_causal=is_causal)


def underflow(block):
    """P-collapse of the block's last q, k under FP8 (S = 1, forward order), one sink key."""
    q, k, v = (t[0] for t in block.attention.last_qkv)  # the batch's first sequence, both heads
    r = roundscope.pcollapse({"q": q, "k": k, "v": v}, recipe="fp8-forward-order", k_sink=1, scale=[1.0],
                             order="forward", causal=True)
    return r["runs"][0]["underflow_fraction"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--recipes", nargs="+", default=["fa2-bf16", "fa3-fp8"])
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()

    data = corpus()
    runs = {"exact": F.scaled_dot_product_attention}
    runs.update({r: rst.sdpa(recipe=r, threads=args.threads) for r in args.recipes})
    models, optimizers = {}, {}
    for name, attention in runs.items():
        torch.manual_seed(0)
        models[name] = ToyTransformer(VOCAB, D_MODEL, HEADS, LAYERS)
        for block in models[name].blocks:
            block.attention = Recorded(attention)  # one record a layer
        optimizers[name] = torch.optim.AdamW(models[name].parameters(), lr=3e-3)
    batches = torch.Generator().manual_seed(1)

    print("step  " + "  ".join(f"{n:>10} loss {'P->0':>7}" for n in runs), flush=True)
    start = time.time()
    for step in range(args.steps):
        at = torch.randint(0, len(data) - CONTEXT - 1, (BATCH,), generator=batches)
        x = torch.stack([data[i:i + CONTEXT] for i in at])
        y = torch.stack([data[i + 1:i + CONTEXT + 1] for i in at])
        cells = []
        for name, model in models.items():
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            cells.append(f"{loss.item():15.4f} {underflow(model.blocks[0]):7.3f}")
        print(f"{step:4d}  " + "  ".join(cells), flush=True)
    print(f"{args.steps} steps of {len(runs)} runs in {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
