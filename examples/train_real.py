"""A small GPT trained on real text on the CPU under BF16 autocast, its attention dumped for
`roundscope report`: the run docs/findings.md's "real run" section is measured on.

    .venv/bin/python examples/train_real.py [--out DIR] [--steps 600] [--dump-every 100]
    build/roundscope report DIR -o DIR/report

The corpus is the Python standard library's own sources (every .py file under
sysconfig's stdlib path, sorted by path, read as bytes: 13 MB on Debian 12's Python 3.11; nothing
is downloaded), split 95/5 into training and held-out text. Each sequence is a beginning-of-sequence token
followed by 255 bytes from a random offset. The model: byte-level (257 tokens), 4 layers,
d_model 256, 4 heads (D = 64), context 256 (--context), pre-LayerNorm, learned positions, AdamW
(lr 2e-3, weight decay 0.1, cosine decay, 50 warm-up steps), gradient clipping 1.0, batch 8. Attention
is BF16: q, k, v are cast to BF16 and PyTorch's SDPA runs its BF16 kernel on them, forward and backward, as under
autocast. The projections and MLP stay in float32 unless --autocast is given: on a CPU without
native BF16 matrix units BF16 autocast is slow (measured on the 2-core AMD EPYC that CI uses,
torch's CPU capability AVX2: a 2048x256x768 BF16 linear 81 ms against 12 ms in float32, 14 s a
training step against 1.2 s), so only the rounding of q, k and v themselves differs from a full
autocast run.

At step 0 and every --dump-every steps (and the last), one fixed held-out sequence is run
forward and backward under the same autocast with every layer's attention captured by
python/roundscope/dump.py (q, k, v, o, do, dq, dk, dv; and x, the layer input as the
query projection reads it, with wq, the query weight): DIR/step{S}_layer{L}.safetensors, one
[1, 4, 256, 64] BF16 head set per file. That probe's gradients are discarded. The attention on
the first token (the sink) per layer and head is printed at each dump and written to
DIR/sinks.json with the losses (rewritten at every dump). At every dump the whole training
state is also saved to DIR/checkpoint.pt: --resume goes on from it, giving the same bits as a
run that was never stopped.
"""
import argparse
import json
import math
import os
import sysconfig
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from roundscope.dump import AttentionDump, replacing

D_MODEL, HEADS, VOCAB = 256, 4, 257
BOS = 256  # every sequence starts with it, as a tokenizer's beginning-of-sequence token


def corpus():
    """The standard library's .py files, sorted by path, as one byte string."""
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in ("site-packages", "dist-packages", "__pycache__"))
        paths += [os.path.join(directory, f) for f in files if f.endswith(".py")]
    data = b"".join(open(p, "rb").read() for p in sorted(paths))
    return root, len(paths), torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def rotary(x):
    """Rotary position embedding (RoFormer, Su et al. 2021) of [B, H, N, D] queries or keys."""
    half = x.shape[-1] // 2
    angle = torch.arange(x.shape[-2], dtype=torch.float32)[:, None] * 10000.0 ** (-torch.arange(half) / half)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)


class Block(nn.Module):
    def __init__(self, dump, heads, width, rope=False):
        super().__init__()
        self.dump, self.heads, self.rope = dump, heads, rope
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width, bias=False), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, n, d = x.shape
        h = self.norm1(x)
        if self.dump.capturing:  # the query projection's operands, as its matmul reads them
            dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else h.dtype
            self.dump.layer_inputs(x=h.to(dtype), wq=self.qkv.weight[:d].t().to(dtype))
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.rope:
            q, k = rotary(q.float()), rotary(k.float())
        q, k, v = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d).to(x.dtype))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, layers, context, dump, heads=HEADS, width=D_MODEL, rope=False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = None if rope else nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(dump, heads, width, rope) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.position is not None:
            x = x + self.position(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


AUTOCAST = False  # --autocast: the whole model under BF16 autocast


def sequences(text, offsets, context):
    """[BOS, context bytes from each offset]: context inputs and context targets per row."""
    return torch.stack([torch.cat([torch.tensor([BOS]), text[o : o + context]]) for o in offsets.tolist()])


def loss_of(model, tokens):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=AUTOCAST):
        logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def causal_mask(n):
    """[n, n], True above the diagonal: the keys a causal query may not see."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def dump_scores(path):
    """A dump's exact attention scores q.k / sqrt(D) per head, [H, N, N], -inf where causally masked."""
    from safetensors.torch import load_file
    t = load_file(path)
    q, k = t["q"].double()[0], t["k"].double()[0]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return scores.masked_fill(causal_mask(scores.shape[-1]), float("-inf"))


def sink_mass(path):
    """Attention on key 0 per head, averaged over query rows 1..N-1, from a dump's q and k."""
    return dump_scores(path).softmax(-1)[:, 1:, 0].mean(-1).tolist()


def check_ranges(parser, ranges):
    """(option, value, low, high) each: an argparse error (exit 2) naming the first out of range."""
    for name, value, low, high in ranges:
        if not low <= value <= high:
            parser.error(f"{name} must be from {low} to {high}, not {value}")


def capture_probe(dump, step, optimizer, loss):
    """Step `step`'s dump of the probe's forward and backward (loss() builds the loss); its
    gradients are thrown away."""
    optimizer.zero_grad()
    with dump.step(step):
        loss().backward()
    optimizer.zero_grad()


def train_step(model, optimizer, schedule, loss):
    """One optimizer step on loss (a scalar tensor of model), gradients clipped to norm 1."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad()


def split_corpus():
    """The corpus (root, file count, bytes) and its 95/5 split into training and held-out text."""
    root, files, data = corpus()
    split = int(len(data) * 0.95)
    return root, files, data, data[:split], data[split:]


# The options a checkpoint must share with the run that resumes it: everything that shapes the
# model, the data order or the learning-rate schedule (not --out, --threads or --dump-every).
RUN_OPTIONS = ("steps", "layers", "d_model", "heads", "rope", "lr", "weight_decay", "batch", "context", "seed",
               "autocast")


CHECKPOINT_KEYS = {"options", "step", "model", "optimizer", "schedule", "generator", "log"}


def checkpoint_path(out):
    return os.path.join(out, "checkpoint.pt")


def write_log(out, log):
    """DIR/sinks.json, rewritten at every dump so that a long run can be watched (and survives a
    stop), replaced atomically: whoever reads it while the run writes sees the old log or the new."""
    path = os.path.join(out, "sinks.json")
    with open(path + ".tmp", "w") as f:
        json.dump(log, f)
    os.replace(path + ".tmp", path)


def save_checkpoint(a, step, model, optimizer, schedule, generator, log):
    """The state before training step `step` (its dump already written), replaced atomically."""
    path = checkpoint_path(a.out)
    with replacing(path) as (f, _):  # a temporary name of its own, never a file already there
        torch.save({"options": {k: getattr(a, k) for k in RUN_OPTIONS}, "step": step, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                    "generator": generator.get_state(), "log": log}, f)


def load_checkpoint_fields(parser, path, state, a, model, optimizer, schedule, generator):
    """Each field checked (its type, shapes, range) and loaded; a bad one is one line naming it
    and exit 2, before any training: never a traceback, a negative step or a run that trains
    nothing and exits 0."""
    def bad(field, why):
        parser.error(f"--resume: {path}: {field} {why}")

    step, log = state["step"], state["log"]
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= a.steps:
        bad("step", f"is {step!r}, not a step from 0 to --steps {a.steps}")
    if not isinstance(log, dict):
        bad("log", f"is a {type(log).__name__}, not a dict")
    for key in ("steps", "dumps"):
        if not isinstance(log.get(key, []), list):
            bad(f"log.{key}", f"is a {type(log[key]).__name__}, not a list")
    if len(log.get("steps", [])) != step:
        bad("log.steps", f"holds {len(log.get('steps', []))} losses, not one for each of the {step} steps done")
    for i, entry in enumerate(log.get("steps", [])):
        loss = entry.get("loss") if isinstance(entry, dict) else entry
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not math.isfinite(loss):
            bad("log.steps", f"entry {i} holds {loss!r}, not a finite loss")
    seconds = log.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        bad("log.seconds", f"is {seconds!r}, not a time in seconds")
    for name, t in (state["model"].items() if isinstance(state["model"], dict) else []):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all():
            bad("model", f"{name} holds NaN or Inf")
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, AttributeError, KeyError, ValueError) as e:
        # PyTorch's first line says only "Error(s) in loading state_dict"; the next says which
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        bad("model", lines[1] if len(lines) > 1 else lines[0])
    o = state["optimizer"]
    if not isinstance(o, dict) or not isinstance(o.get("state"), dict) or not isinstance(o.get("param_groups"), list):
        bad("optimizer", "is not an optimizer's state (state, param_groups)")
    parameters = [p for g in optimizer.param_groups for p in g["params"]]
    if step > 0 and len(o["state"]) != len(parameters):
        bad("optimizer",
            f"holds AdamW's moments for {len(o['state'])} of {len(parameters)} parameters after {step} steps")
    for i, s in o["state"].items():
        if not isinstance(i, int) or not 0 <= i < len(parameters) or not isinstance(s, dict):
            bad("optimizer", f"has state for parameter {i!r}, which the model lacks")
        for key in ("exp_avg", "exp_avg_sq"):
            if not isinstance(s.get(key), torch.Tensor) or s[key].shape != parameters[i].shape:
                bad("optimizer", f"{key} of parameter {i} is not a tensor of its shape {tuple(parameters[i].shape)}")
            if not torch.isfinite(s[key]).all():
                bad("optimizer", f"{key} of parameter {i} holds NaN or Inf")
    try:
        optimizer.load_state_dict(o)
    except (RuntimeError, TypeError, KeyError, ValueError) as e:
        bad("optimizer", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    sched = state["schedule"]
    last = sched.get("last_epoch") if isinstance(sched, dict) else None
    if isinstance(last, bool) or not isinstance(last, int) or last != step:  # one schedule step a training step
        bad("schedule", f"is at step {last!r}, not at the checkpoint's step {step}")
    try:
        schedule.load_state_dict(state["schedule"])
    except (RuntimeError, TypeError, KeyError, ValueError, AttributeError) as e:
        bad("schedule", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    g = state["generator"]
    if not isinstance(g, torch.Tensor) or g.dtype != torch.uint8 or g.dim() != 1:
        bad("generator", "is not a random generator's state (a 1-D uint8 tensor)")
    try:
        generator.set_state(g)
    except (RuntimeError, TypeError, ValueError) as e:
        bad("generator", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)


def resume(parser, a, model, optimizer, schedule, generator, log):
    """Loads DIR/checkpoint.pt into the run; (the step to go on from, the seconds already spent).
    An argparse error (exit 2) where there is none or its options differ from these."""
    path = checkpoint_path(a.out)
    if not os.path.isfile(path):
        parser.error(f"--resume: no checkpoint at {path}")
    try:
        state = torch.load(path, weights_only=True)
    except Exception as e:  # a truncated or foreign file: name it, stop before any work
        parser.error(f"--resume: {path} is not a checkpoint of this example ({type(e).__name__})")
    if not isinstance(state, dict) or set(state) != CHECKPOINT_KEYS or not isinstance(state["options"], dict) or \
            set(state["options"]) != set(RUN_OPTIONS):
        parser.error(f"--resume: {path} is not a checkpoint of this example (its keys differ)")
    for key, value in state["options"].items():
        if getattr(a, key) != value:
            parser.error(f"--resume: {path} was made with --{key.replace('_', '-')} {value}, not {getattr(a, key)}")
    load_checkpoint_fields(parser, path, state, a, model, optimizer, schedule, generator)
    log.update(state["log"])
    return state["step"], state["log"].get("seconds", 0.0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", default="real-run", help="folder for the dumps and sinks.json")
    parser.add_argument("--steps", type=int, default=600, help="training steps")
    parser.add_argument("--dump-every", type=int, default=100, help="dump every layer every this many steps")
    parser.add_argument("--layers", type=int, default=4, help="transformer layers")
    parser.add_argument("--d-model", type=int, default=D_MODEL, help="model width")
    parser.add_argument("--heads", type=int, default=HEADS, help="attention heads per layer (D = d_model / heads)")
    parser.add_argument("--rope", action="store_true", help="rotary positions on q and k instead of learned positions")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate of AdamW")
    parser.add_argument("--weight-decay", type=float, default=0.1, help="AdamW's decoupled weight decay")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step")
    parser.add_argument("--context", type=int, default=256, help="tokens per sequence: N in the dumps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data order")
    parser.add_argument("--resume", action="store_true", help="go on from DIR/checkpoint.pt (written at every dump) "
                        "with the same options")
    parser.add_argument("--autocast", action="store_true", help="the whole model under BF16 autocast (slow on CPUs "
                        "without native BF16 matrix units)")
    a = parser.parse_args(argv)
    check_ranges(parser, (("--steps", a.steps, 1, 10**7), ("--dump-every", a.dump_every, 1, 10**7),
                          ("--layers", a.layers, 1, 64), ("--d-model", a.d_model, 8, 4096), ("--heads", a.heads, 1, 64),
                          ("--batch", a.batch, 1, 4096),
                          ("--context", a.context, 2, 4096), ("--threads", a.threads, 0, 1024),
                          ("--weight-decay", a.weight_decay, 0, 10)))
    if not (math.isfinite(a.lr) and 0 < a.lr < 1):
        parser.error(f"--lr must be a number above 0 and below 1, not {a.lr}")
    if a.d_model % a.heads:
        parser.error(f"--heads must divide --d-model {a.d_model}, not {a.heads}")
    global AUTOCAST
    AUTOCAST = a.autocast
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    root, files, data, train, held_out = split_corpus()
    print(f"corpus: {files} files under {root}, {len(data) / 1e6:.1f} MB ({len(train)} bytes for training)")

    dump_steps = sorted({0, a.steps - 1, *range(0, a.steps, a.dump_every)})
    dump = AttentionDump(a.out, steps=dump_steps)
    model = GPT(a.layers, a.context, dump, a.heads, a.d_model, a.rope)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=a.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps)))
    probe = sequences(held_out, torch.tensor([0]), a.context)
    generator = torch.Generator().manual_seed(a.seed)
    log = {"corpus": {"root": root, "files": files, "bytes": len(data)}, "steps": [], "dumps": []}
    first, elapsed = 0, 0.0
    if a.resume:
        first, elapsed = resume(parser, a, model, optimizer, schedule, generator, log)
        print(f"resumed at step {first} of {a.steps} from {checkpoint_path(a.out)}")
    start = time.time() - elapsed
    for step in range(first, a.steps):
        if step in dump_steps and not (a.resume and step == first):
            capture_probe(dump, step, optimizer, lambda: loss_of(model, probe))
            masses = [sink_mass(os.path.join(a.out, f"step{step}_layer{layer}.safetensors"))
                      for layer in range(a.layers)]
            log["dumps"].append({"step": step, "sink_mass": masses})
            print(f"step {step}: attention on the first token per layer and head: "
                  + "; ".join(" ".join(f"{m:.2f}" for m in layer) for layer in masses))
            log["seconds"] = time.time() - start
            save_checkpoint(a, step, model, optimizer, schedule, generator, log)
            write_log(a.out, log)  # after the checkpoint: a dump listed here is in the checkpoint too
        batch = sequences(train, torch.randint(0, len(train) - a.context, (a.batch,), generator=generator), a.context)
        loss = loss_of(model, batch)
        train_step(model, optimizer, schedule, loss)
        log["steps"].append(loss.item())
        if step % 25 == 0 or step == a.steps - 1:
            with torch.no_grad():
                held = loss_of(model, sequences(held_out, torch.arange(1, 9) * a.context, a.context))
            print(f"step {step}: loss {loss.item():.4f}, held-out {held.item():.4f}, {time.time() - start:.0f} s",
                  flush=True)
    log["seconds"] = time.time() - start
    write_log(a.out, log)
    print(f"{a.steps} steps in {log['seconds']:.0f} s; {len(dump.written)} dumps in {a.out}")

if __name__ == "__main__":
    main()
