"""The BF16-bias training claim (Qiu & Yao, arXiv:2510.04212) put to a test it can fail: a set-up
that forces the regime the mechanism needs, tied keys at P-bar = 1 holding nearly all of a row,
and the delta error logged on every training batch. examples/train_bias.py's small byte-level
GPT and attention.py's arithmetic (examples/train_bias.py: released_forward, released_backward),
with two changes that make identical keys:

- the data are exact repeats: each sequence is a segment of --repeat bytes of the training text,
  tiled to the context, so every token of a segment occurs context / repeat times;
- positions repeat with the data (--positions periodic): position i is embedded as i mod
  --repeat, so a token and its copies are one and the same input to layer 0, and their keys
  there are bit-identical. A head that attends to one position of the period (the next byte's
  earlier copies, which predict it) ends with all of them at P-bar = 1.

The issue's first suggestion, layer 0 without position (--positions after-layer-0), and the
model of examples/train_bias.py (--positions input) on the same data did not pass the gate
(docs/findings.md): the heads that turned sharp attended to one key, by position.

Every training batch logs, per layer and head: the rows whose keys at P-bar = 1 (after P-bar's
BF16 cast) hold more than 1 - 2^-9 of the row's P-bar, with two or more such keys
(`tie_dominated`) or one (`one_key`); the rows where the released code's 1e-10 clamp of the row
sum fired (`clamped`); the largest logit; and the delta error sum over rows of delta - delta_hp,
delta_hp = rowsum(dO * O) from O recomputed in float64 from the same BF16 q, k, v and dO
(`coef`: the delta the run's backward used; `coef_l_bf16`: from the run's O, whose row sum is
stored in BF16; `coef_l_f32`: from that O with the row sum kept in float32). After each step,
|W^Q| per head (Frobenius). Three runs from one seed and data order (--fix none, max-adjust,
f32-delta), then examples/bias_forced_verdict.py applies the rule it states, fixed before the
runs:

    .venv/bin/python examples/train_bias_forced.py --fix none --out forced-run/none
    .venv/bin/python examples/train_bias_forced.py --fix max-adjust --out forced-run/max-adjust
    .venv/bin/python examples/train_bias_forced.py --fix f32-delta --out forced-run/f32-delta
    .venv/bin/python examples/bias_forced_verdict.py forced-run

The runs without the max adjustment check the gate at --gate-step: if no head had 1 % of its rows
tie-dominated over the 50 batches before it, the regime did not form, the run says so and stops
(the set-up must change; nothing after the gate would test the claim). The run with the max
adjustment has no ties by construction (it moves the max away from them) and runs on.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_bias import (BF16, add_run_options, check_run_options, released_backward,  # noqa: E402
                        released_forward)
from train_real import BOS, VOCAB, causal_mask, check_ranges, split_corpus, train_step  # noqa: E402

NEAR_ONE = 1 - 2.0 ** -9  # the tie decides P-bar V's rounding where the rest is below this
GATE_WINDOW, GATE_SHARE = 50, 0.01


def delta_float64(q, k, v, d_o, causal):
    """rowsum(dO * O) with O = softmax(q k^T / sqrt(D)) v in float64 from the operands as held."""
    q, k, v, d_o = q.double(), k.double(), v.double(), d_o.double()
    s = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if causal:
        s = s.masked_fill(causal_mask(s.shape[-1]), float("-inf"))
    o = torch.einsum("...ij,...jd->...id", s.softmax(dim=-1), v)
    return (d_o * o).sum(dim=-1, keepdim=True)


def tie_counts(p):
    """Per head: rows whose keys at P-bar = 1 (after the BF16 cast) hold more than 1 - 2^-9 of
    the row's P-bar, with two or more such keys (tie-dominated) and with one, the rest above 0."""
    at_one = p.to(BF16) == 1
    held = (p * at_one).sum(dim=-1)
    rest = (p * ~at_one).sum(dim=-1)
    dominated = held > NEAR_ONE * (held + rest)
    keys = at_one.sum(dim=-1)
    return (dominated & (keys >= 2)).sum(dim=(0, 2)), (dominated & (keys == 1) & (rest > 0)).sum(dim=(0, 2))


class Recorder:
    """What one training batch's attention logs, layer by layer (filled by ForcedAttention)."""

    def __init__(self):
        self.layers = {}

    def layer(self, index):
        return self.layers.setdefault(index, {})


class ForcedAttention(torch.autograd.Function):
    """attention.py's arithmetic (released_forward, released_backward), with the batch's
    statistics written into the recorder's entry for this layer."""

    @staticmethod
    def forward(ctx, q, k, v, causal, fix, entry):
        f = released_forward(q, k, v, causal, fix)
        with torch.no_grad():
            tied, one_key = tie_counts(f["p"])
            entry["rows"] = q.shape[0] * q.shape[2]
            entry["tie_dominated"], entry["one_key"] = tied.tolist(), one_key.tolist()
            entry["clamped"] = (f["row_sum"] < 1e-10).sum(dim=(0, 2, 3)).tolist()
            entry["max_logit"] = f["s"].float().amax(dim=(0, 2, 3)).tolist()
            l32 = f["row_sum"].clamp(min=1e-10)
            o_l_f32 = (f["pv"].float() / l32).to(BF16)  # the same O with the row sum in float32
        ctx.save_for_backward(q, k, v, f["o"], f["lse"], o_l_f32)
        ctx.causal, ctx.fix, ctx.entry = causal, fix, entry
        return f["o"]

    @staticmethod
    def backward(ctx, d_o):
        q, k, v, o, lse, o_l_f32 = ctx.saved_tensors
        dq, dk, dv, delta = released_backward(q, k, v, o, lse, d_o, ctx.causal, ctx.fix)
        with torch.no_grad():
            d_o = d_o.to(BF16)
            exact = delta_float64(q, k, v, d_o, ctx.causal)

            def coefficient(d):
                return (d.double() - exact).sum(dim=(0, 2, 3)).tolist()

            ctx.entry["coef"] = coefficient(delta)
            ctx.entry["coef_l_bf16"] = coefficient((d_o.float() * o.float()).sum(dim=-1, keepdim=True))
            ctx.entry["coef_l_f32"] = coefficient((d_o.float() * o_l_f32.float()).sum(dim=-1, keepdim=True))
        return dq, dk, dv, None, None, None


class Block(nn.Module):
    def __init__(self, index, width, heads, fix, recorder):
        super().__init__()
        self.index, self.heads, self.fix, self.recorder = index, heads, fix, recorder
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, values=None):
        """values: where given, what V is made from instead of x (Q and K still from x)."""
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).to(BF16).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if values is not None:
            qkv = self.qkv(self.norm1(values)).to(BF16).view(b, n, 3, self.heads, d // self.heads)
            v = qkv[:, :, 2].transpose(1, 2)
        o = ForcedAttention.apply(q, k, v, True, self.fix, self.recorder.layer(self.index))
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d).to(x.dtype))
        return x + self.mlp(self.norm2(x))

    def query_norms(self):
        """|W^Q| of each head (Frobenius), the rows of qkv's weight that make its queries."""
        d = self.qkv.weight.shape[1]
        return self.qkv.weight[:d].detach().view(self.heads, -1).norm(dim=-1).tolist()


class GPT(nn.Module):
    """positions: "periodic" (position i embedded as i mod `period`: with data repeating with
    that period, a token and its copies are one input, so their keys are identical in layer 0),
    "after-layer-0" (the position embedding joins the residual stream after layer 0, whose keys
    are then the token's alone), "input" (examples/train_bias.py's model) or "none" (no position
    embedding: causal attention alone tells positions apart). distinct_values: layer 0's V is made
    from its input plus an embedding of the absolute position, so that copies, whose keys are
    identical, have values of their own (as two different keys tied at the max do)."""

    def __init__(self, layers, width, heads, context, fix, recorder, positions, period, distinct_values=False):
        super().__init__()
        self.period = period
        self.value_position = nn.Embedding(context, width) if distinct_values else None
        self.embed, self.position = nn.Embedding(VOCAB, width), nn.Embedding(context, width)
        self.positions = positions
        self.blocks = nn.ModuleList(Block(i, width, heads, fix, recorder) for i in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        where = torch.arange(tokens.shape[1])
        if self.positions == "periodic":
            where = where % self.period
        for i, block in enumerate(self.blocks):
            if (self.positions in ("input", "periodic") and i == 0) or (self.positions == "after-layer-0" and i == 1):
                x = x + self.position(where)
            values = None
            if i == 0 and self.value_position is not None:
                values = x + self.value_position(torch.arange(tokens.shape[1]))
            x = block(x, values)
        return self.head(self.norm(x))


def repeated_sequences(text, offsets, repeat, context):
    """[BOS, the repeat bytes from each offset tiled to context bytes]: context inputs and targets."""
    rows = []
    for o in offsets.tolist():
        rows.append(torch.cat([torch.tensor([BOS]), text[o : o + repeat].repeat(context // repeat + 1)[:context]]))
    return torch.stack(rows)


def gate(log):
    """The largest tie-dominated share of a head's rows over the GATE_WINDOW batches before the
    gate step, and its layer and head."""
    window = log["batches"][-GATE_WINDOW:]
    best = (0.0, 0, 0)
    for layer in window[0]["layers"]:
        for h in range(len(window[0]["layers"][layer]["tie_dominated"])):
            rows = sum(b["layers"][layer]["rows"] for b in window)
            share = sum(b["layers"][layer]["tie_dominated"][h] for b in window) / rows
            best = max(best, (share, int(layer), h))
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default="forced-run/none", help="folder for log.json")
    parser.add_argument("--steps", type=int, default=2000, help="training steps")
    parser.add_argument("--gate-step", type=int, default=300, help="the step at which the regime must have formed")
    parser.add_argument("--positions", choices=("periodic", "after-layer-0", "input", "none"), default="periodic",
                        help="where the position embedding joins (see GPT)")
    parser.add_argument("--values", choices=("copies", "distinct"), default="copies",
                        help="copies: a token's copies have one value as they have one key; distinct: layer 0's "
                             "values also see the absolute position (added after the first runs)")
    parser.add_argument("--repeat", type=int, default=16, help="bytes of text each sequence repeats (the period)")
    add_run_options(parser)
    a = parser.parse_args(argv)
    check_ranges(parser, (("--steps", a.steps, 1, 10**7), ("--gate-step", a.gate_step, GATE_WINDOW, 10**7),
                          ("--repeat", a.repeat, 1, 512)))
    check_run_options(parser, a)
    if a.repeat > a.context:
        parser.error(f"--repeat {a.repeat} is longer than --context {a.context}: nothing would repeat")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    _, _, _, train, _ = split_corpus()
    recorder = Recorder()
    model = GPT(a.layers, a.width, a.heads, a.context, a.fix, recorder, a.positions, a.repeat, a.values == "distinct")
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 100))
    generator = torch.Generator().manual_seed(a.seed)
    log = {"fix": a.fix, "args": vars(a), "batches": [], "gate": None}
    os.makedirs(a.out, exist_ok=True)
    start = time.time()
    for step in range(a.steps):
        offsets = torch.randint(0, len(train) - a.context, (a.batch,), generator=generator)
        batch = repeated_sequences(train, offsets, a.repeat, a.context)
        recorder.layers = {}
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        train_step(model, optimizer, schedule, loss)
        log["batches"].append({"step": step, "loss": loss.item(),
                               "layers": {str(i): e for i, e in sorted(recorder.layers.items())},
                               "wq": [block.query_norms() for block in model.blocks]})
        if step + 1 == a.gate_step:
            share, layer, head = gate(log)
            log["gate"] = {"step": a.gate_step, "tie_dominated_share": share, "layer": layer, "head": head}
            formed = share >= GATE_SHARE
            print(f"{a.fix} gate at step {a.gate_step}: {100 * share:.2f} % of layer {layer} head {head}'s rows "
                  f"tie-dominated, the most of any head ({'formed' if formed else 'did not form'})", flush=True)
            if not formed and a.fix != "max-adjust":
                break
        if step % 100 == 0 or step == a.steps - 1:
            print(f"{a.fix} step {step}: loss {loss.item():.4f}, {time.time() - start:.0f} s", flush=True)
    log["seconds"] = time.time() - start
    with open(os.path.join(a.out, "log.json"), "w") as f:
        json.dump(log, f)
    print(f"{len(log['batches'])} steps in {log['seconds']:.0f} s; log in {a.out}/log.json")


if __name__ == "__main__":
    main()
