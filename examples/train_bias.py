"""A training run put to the BF16 bias claim (Qiu & Yao, arXiv:2510.04212): a small
byte-level GPT whose attention is the paper's released flash attention (attention.py, one
512-key bucket here) with the dtypes CUDA BF16 autocast gives it written out, trained three
times from one seed and data order: with no fix, with the max adjustment (the code's STABLE=1),
and with delta formed from an O recomputed in float32. Every --dump-every steps every layer's
attention on a fixed held-out sequence is dumped (python/roundscope/dump.py) for
`roundscope bias`:

    .venv/bin/python examples/train_bias.py --fix none --out bias-run/none
    .venv/bin/python examples/train_bias.py --fix max-adjust --out bias-run/max-adjust
    .venv/bin/python examples/train_bias.py --fix f32-delta --out bias-run/f32-delta
    .venv/bin/python examples/bias_verdict.py bias-run     # bias on every dump, per head

The attention's arithmetic, as attention.py runs under autocast (train.py: compile = True):
S = (Q K^T) rounded to BF16, times the scale in BF16; the row max in BF16 (the max adjustment
doubles a positive block max that more than one score reaches within 1e-3, zeroes a negative
one); P-bar = exp(S - m) in float32 from the BF16 difference; the row sum in float32 stored in
BF16; P-bar V with P-bar cast to BF16, the product in BF16; O = P-bar V / l in BF16; LSE in
float32. Backward: P = exp(S - LSE) in float32, dS = P scale (dP - delta) with dP in BF16,
delta = rowsum(dO * O) as the compiled backward forms it (exact products, a float32 sum),
dQ, dK, dV from BF16 products. The rest of the model is float32 (BF16 autocast is slow on CPUs
without BF16 matrix units); the corpus and data order are examples/train_real.py's.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roundscope.dump import AttentionDump
from train_real import (VOCAB, capture_probe, causal_mask, check_ranges, dump_scores, sequences,  # noqa: E402
                        split_corpus, train_step)

BF16, F32 = torch.bfloat16, torch.float32


def scores(q, k, scale, causal, masked):
    """S as the released code forms it: the product in q's dtype, times the scale, masked."""
    s = torch.einsum("...id,...jd->...ij", q, k) * scale
    return s.masked_fill(causal_mask(s.shape[-1]), masked) if causal else s


def released_forward(q, k, v, causal, fix):
    """One bucket of attention.py's forward (N <= 512) with BF16 autocast's dtypes: o (BF16),
    lse (float32), and what the forced run's statistics read: P-bar (float32), the row sum in
    float32 before its clamp and BF16 store, and P-bar V (BF16)."""
    scale = q.shape[-1] ** -0.5
    masked = -torch.finfo(BF16).max
    s = scores(q, k, scale, causal, masked)
    m = s.amax(dim=-1, keepdim=True)
    if fix == "max-adjust":
        several = (s >= m - 1e-3).sum(dim=-1, keepdim=True) > 1
        m = torch.where(several & (m > 0), 2.0 * m, m)
        m = torch.where(several & (m < 0), torch.zeros_like(m), m)
    m = torch.maximum(m, torch.full_like(m, masked))
    p = torch.exp((s - m).float())  # the BF16 difference, exp in float32
    row_sum = p.sum(dim=-1, keepdim=True)
    row_sum_bf16 = row_sum.clamp(min=1e-10).to(BF16)  # stored in the BF16 row sums (l)
    pv = torch.einsum("...ij,...jd->...id", p.to(BF16), v)  # P-bar V in BF16
    o = pv / row_sum_bf16  # O.div_(l) in BF16
    lse = row_sum_bf16.float().log() + m.float()
    return {"o": o, "lse": lse, "s": s, "p": p, "row_sum": row_sum, "pv": pv}


def float32_o(q, k, v, causal):
    """The forward output recomputed in float32 from the same q, k, v (the f32-delta fix)."""
    s32 = scores(q.float(), k.float(), q.shape[-1] ** -0.5, causal, float("-inf"))
    return torch.einsum("...ij,...jd->...id", s32.softmax(dim=-1), v.float())


def released_backward(q, k, v, o, lse, d_o, causal, fix):
    """attention.py's backward under BF16 autocast: dq, dk, dv and the delta it used (float32)."""
    scale = q.shape[-1] ** -0.5
    s = scores(q, k, scale, causal, float("-inf"))
    p = torch.exp(s.float() - lse)
    d_o = d_o.to(BF16)
    dv = torch.einsum("...ij,...id->...jd", p.to(BF16), d_o)
    dp = torch.einsum("...id,...jd->...ij", d_o, v)
    o_delta = float32_o(q, k, v, causal) if fix == "f32-delta" else o.float()
    delta = (d_o.float() * o_delta).sum(dim=-1, keepdim=True)  # exact products, a float32 sum
    ds = p * scale * (dp.float() - delta)
    dq = torch.einsum("...ij,...jd->...id", ds.to(BF16), k)
    dk = torch.einsum("...ij,...id->...jd", ds.to(BF16), q)
    return dq, dk, dv, delta


class ReleasedFlashAttention(torch.autograd.Function):
    """One bucket of attention.py's FlashAttentionFunction (N <= 512), BF16 autocast's dtypes.
    `clamped_rows` counts the rows whose row sum the code's 1e-10 clamp replaced (main reads and
    resets it every step)."""

    clamped_rows = 0

    @staticmethod
    def forward(ctx, q, k, v, causal, fix):
        f = released_forward(q, k, v, causal, fix)
        ReleasedFlashAttention.clamped_rows += int((f["row_sum"] < 1e-10).sum())
        ctx.save_for_backward(q, k, v, f["o"], f["lse"])
        ctx.causal, ctx.fix = causal, fix
        return f["o"]

    @staticmethod
    def backward(ctx, d_o):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv, _ = released_backward(q, k, v, o, lse, d_o, ctx.causal, ctx.fix)
        return dq, dk, dv, None, None


class Block(nn.Module):
    def __init__(self, width, heads, dump, fix):
        super().__init__()
        self.heads, self.dump, self.fix = heads, dump, fix
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.attention = dump.wrap(ReleasedFlashAttention.apply, positional=("causal", "fix"))

    def forward(self, x):
        b, n, d = x.shape
        h = self.norm1(x)
        if self.dump.capturing:
            self.dump.layer_inputs(x=h, wq=self.qkv.weight[:d].t())
        q, k, v = self.qkv(h).to(BF16).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attention(q, k, v, True, self.fix)
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d).to(x.dtype))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, context, dump, fix):
        super().__init__()
        self.embed, self.position = nn.Embedding(VOCAB, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, dump, fix) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def max_logit(path):
    """The largest attention score (q.k scale) of a dump, over heads and rows."""
    return dump_scores(path).amax().item()


def loss_of(model, tokens):
    """Next-byte cross entropy of a [B, N + 1] token batch (the model in float32, attention BF16)."""
    return F.cross_entropy(model(tokens[:, :-1]).reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def add_run_options(parser):
    """The options of the model, its data and its training that the bias runs share."""
    parser.add_argument("--fix", choices=("none", "max-adjust", "f32-delta"), default="none",
                        help="which fix the run trains with")
    parser.add_argument("--layers", type=int, default=2, help="transformer layers")
    parser.add_argument("--width", type=int, default=128, help="model width")
    parser.add_argument("--heads", type=int, default=2, help="heads of width / heads features (D = 64 by default)")
    parser.add_argument("--context", type=int, default=256, help="tokens per sequence after BOS: N in the dumps")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step")
    parser.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate (after 100 warm-up steps)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data order")


def check_run_options(parser, a):
    """add_run_options' options checked: an argparse error (exit 2) naming the first bad one."""
    check_ranges(parser, (("--layers", a.layers, 1, 64), ("--width", a.width, 2, 8192), ("--heads", a.heads, 1, 256),
                          ("--context", a.context, 2, 512), ("--batch", a.batch, 1, 4096),
                          ("--threads", a.threads, 0, 1024)))
    if a.width % a.heads:
        parser.error(f"--width {a.width} is not a multiple of --heads {a.heads}")
    if not (math.isfinite(a.lr) and 0 < a.lr < 1):
        parser.error(f"--lr must be in (0, 1), not {a.lr}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default="bias-run/none", help="folder for the dumps and log.json")
    parser.add_argument("--steps", type=int, default=3000, help="training steps")
    parser.add_argument("--dump-every", type=int, default=50, help="dump every layer every this many steps")
    add_run_options(parser)
    a = parser.parse_args(argv)
    check_ranges(parser, (("--steps", a.steps, 1, 10**7), ("--dump-every", a.dump_every, 1, 10**7)))
    check_run_options(parser, a)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    _, _, _, train, held_out = split_corpus()
    if len(train) <= a.context + 1 or len(held_out) <= 9 * a.context + 1:
        parser.error(f"--context {a.context} is longer than the corpus allows")

    dump_steps = sorted({0, a.steps - 1, *range(0, a.steps, a.dump_every)})
    dump = AttentionDump(a.out, steps=dump_steps)
    model = GPT(a.layers, a.width, a.heads, a.context, dump, a.fix)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
    probe = sequences(held_out, torch.tensor([0]), a.context)
    generator = torch.Generator().manual_seed(a.seed)
    log = {"fix": a.fix, "args": vars(a), "steps": [], "clamped_rows": [], "dumps": []}
    start = time.time()
    for step in range(a.steps):
        if step in dump_steps:
            capture_probe(dump, step, optimizer, lambda: loss_of(model, probe))
            logits = [max_logit(os.path.join(a.out, f"step{step}_layer{layer}.safetensors"))
                      for layer in range(a.layers)]
            log["dumps"].append({"step": step, "max_logit": logits})
        batch = sequences(train, torch.randint(0, len(train) - a.context, (a.batch,), generator=generator), a.context)
        ReleasedFlashAttention.clamped_rows = 0
        loss = loss_of(model, batch)
        train_step(model, optimizer, schedule, loss)
        log["steps"].append(loss.item())
        log["clamped_rows"].append(ReleasedFlashAttention.clamped_rows)  # this batch's, every layer and head
        if step % 100 == 0 or step == a.steps - 1:
            print(f"{a.fix} step {step}: loss {loss.item():.4f}, {time.time() - start:.0f} s", flush=True)
    log["seconds"] = time.time() - start
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(log, f)
    print(f"{a.steps} steps in {log['seconds']:.0f} s; {len(dump.written)} dumps in {a.out}; the row sum's clamp "
          f"fired in {sum(log['clamped_rows'])} of {a.steps * a.batch * a.context * a.layers * a.heads} training rows")


if __name__ == "__main__":
    main()
