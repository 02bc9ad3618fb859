"""What a padding mask changes in SmolLM2-135M's figures: two texts of different lengths run as one
right-padded batch through Hugging Face transformers (roundscope.hf), the shorter text also
alone; chosen layers dumped in float32, then

  - compare (fa2-f32) on the padded dump as it is, and with its attn_mask dropped (what a
    consumer that ignores the mask computes: the padding keys back in every row's softmax);
  - P-collapse (fa3-fp8, the first key the sink) on the shorter text's rows of the padded batch against the text alone
    (the padded batch adds its padding queries: rows the model computes and the loss ignores).

    python examples/padded_batch.py OUT [--long 512] [--short 300] [--layers 12,20,29]
"""
import argparse
import json
import os
import subprocess
import sys

from safetensors.torch import load_file, save_file

import roundscope as rs
import roundscope.hf as hf
from roundscope import llama
from roundscope.dump import AttentionDump


def cli():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("ROUNDSCOPE_CLI", os.path.join(here, "..", "build", "roundscope"))


def run(*args):
    p = subprocess.run([cli(), *map(str, args), "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"roundscope {' '.join(map(str, args))}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def tokens(tokenizer, text, n):
    ids = tokenizer(text, return_tensors="pt")["input_ids"][0][:n]
    return tokenizer.decode(ids)


def forward_s1(result):
    """A pcollapse result's underflow fraction in the forward order at S = 1."""
    return next(x["underflow_fraction"] for x in result["runs"] if x["order"] == "forward" and x["scale"] == 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--long", type=int, default=512, help="tokens of the long text (the Jargon File)")
    parser.add_argument("--short", type=int, default=300, help="tokens of the short text (the Python tutorial)")
    parser.add_argument("--layers", default="12,20,29")
    parser.add_argument("--threads", type=int, default=0)
    a = parser.parse_args(argv)
    layers = [int(x) for x in a.layers.split(",")]
    model, tokenizer = hf.smollm2()
    texts = [tokens(tokenizer, llama.read_text("jargon"), a.long),
             tokens(tokenizer, llama.read_text("python-tutorial"), a.short)]
    batch = hf.padded_batch(tokenizer, texts)
    lengths = batch["attention_mask"].sum(1).tolist()
    print(f"batch {tuple(batch['input_ids'].shape)}, lengths {lengths}")
    alone = hf.padded_batch(tokenizer, texts[1:])
    for name, inputs in (("padded", batch), ("alone", alone)):
        labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
        with AttentionDump(os.path.join(a.out, name), layers=layers).step(0):
            model(**inputs, labels=labels).loss.backward()
    threads = ["--threads", a.threads] if a.threads else []
    print("| layer | compare o rel_rms: with the mask | mask dropped | P-collapse fwd S=1: text alone | "
          "its rows of the padded batch |")
    print("| --- | --- | --- | --- | --- |")
    for layer in layers:
        padded = os.path.join(a.out, "padded", f"step0_layer{layer}.safetensors")
        with_mask = run("compare", padded, "--recipe", "fa2-f32", *threads)["outputs"]["o"]["rel_rms"]
        t, meta = load_file(padded), rs.read_metadata(padded)
        del t["attn_mask"]
        unmasked = os.path.join(a.out, "padded", f"nomask_layer{layer}.safetensors")
        save_file(t, unmasked, metadata=meta)
        without = run("compare", unmasked, "--recipe", "fa2-f32", *threads)["outputs"]["o"]["rel_rms"]
        # the short text's entry of the batch, its mask with it
        t = load_file(padded)
        second = {n: x[1:2].contiguous() for n, x in t.items()}
        row = os.path.join(a.out, "padded", f"second_layer{layer}.safetensors")
        save_file(second, row, metadata=meta)
        collapse = ["--recipe", "fa3-fp8", "--k-sink", "1", *threads]  # as the report and docs/findings.md run it
        own = run("pcollapse", os.path.join(a.out, "alone", f"step0_layer{layer}.safetensors"), *collapse)
        in_batch = run("pcollapse", row, *collapse)
        print(f"| {layer} | {with_mask:.3g} | {without:.3g} | {forward_s1(own):.4f} | {forward_s1(in_batch):.4f} |")


if __name__ == "__main__":
    main()
