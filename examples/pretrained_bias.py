"""The BF16 bias regime on a pretrained model's heads, over several texts and windows: the
verdict row of docs/findings.md that asks whether the regime forms.

    python -m roundscope.llama_dumps DUMPS --text jargon --text python-tutorial --text gpl-3 \\
        --text python-howto --text python-faq --n 1024 --windows 3
    python examples/pretrained_bias.py DUMPS [--recipe fa2-bf16-torch-compiled] [--threads 2] [--json OUT]

For every head of every dump (a layer of one text window: one step) it runs `roundscope bias`
on that head alone under the recipe, with the recipe's own O (the dump's O is PyTorch's kernel,
not the released code) and counts: the rows where two keys at P-bar = 1 hold more than 1 - 2^-9
of the row (the paper's tied pair: `tie_dominated_rows`), the rows where one key at P-bar = 1
holds that much but not all (`one_key_rows`), and the sum of delta's error over the head's rows,
whose sign over the steps is put to an exact two-sided sign test per head. It names the heads
where either regime holds at least 1 % of a step's rows, with their signs. Results are kept in
DUMPS/bias-RECIPE/ (a second run reads them)."""
import argparse
import collections
import concurrent.futures
import glob
import json
import os
import re
import sys

import roundscope
from roundscope.dump import replacing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bias_verdict import sign_test  # noqa: E402

REGIME_SHARE = 0.01  # a head-step where a regime holds at least this share of the rows


def head_inputs(tensors: dict, head: int) -> dict:
    """Query head `head` and the key-value head it reads ([B, H, N, D] dumps, grouped or not),
    without O: the recipe forms its own."""
    group = tensors["q"].shape[1] // tensors["k"].shape[1]
    kv = head // group
    return {"q": tensors["q"][:, head:head + 1], "k": tensors["k"][:, kv:kv + 1],
            "v": tensors["v"][:, kv:kv + 1], "do": tensors["do"][:, head:head + 1]}


def measure(path: str, cache: str, recipe: str) -> list[dict]:
    """Each head of one dump: its rows, regime counts and delta's error sum."""
    if os.path.isfile(cache):
        with open(cache) as f:
            return json.load(f)
    tensors, meta = roundscope.read(path), roundscope.read_metadata(path)
    if meta.get("causal_alignment", "top-left") != "top-left" and tensors["q"].shape[2] != tensors["k"].shape[2]:
        raise SystemExit(f"{path}: a bottom-right causal mask over Nq != Nk is not what the released code runs")
    causal, scale = meta.get("causal") == "true", float(meta["softmax_scale"])
    heads = []
    for h in range(tensors["q"].shape[1]):
        r = roundscope.bias(head_inputs(tensors, h), recipe=recipe, causal=causal, softmax_scale=scale, threads=1)
        heads.append({"rows": r["rows"], "coefficient_sum": r["coefficient_sum"], "tied_rows": r["tied_rows"],
                      "tie_dominated_rows": r["tie_dominated_rows"], "one_key_rows": r["one_key_rows"]})
    with replacing(cache, "w") as (f, _):
        json.dump(heads, f)
    return heads


def step_and_layer(path: str) -> tuple[int, int]:
    m = re.search(r"step(\d+)_layer(\d+)\.safetensors$", path)
    if m is None:
        raise SystemExit(f"{path}: not a llama_dumps file name (stepS_layerL.safetensors)")
    return int(m.group(1)), int(m.group(2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", help="a folder of python -m roundscope.llama_dumps (its texts' subfolders)")
    p.add_argument("--recipe", default="fa2-bf16-torch-compiled", help="the kernel whose delta is judged")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="dumps at once")
    p.add_argument("--json", help="also write every head-step's counts here")
    a = p.parse_args(argv)
    if a.threads < 1:
        print("--threads: at least 1", file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(a.dumps, "*", "step*_layer*.safetensors")))
    if not files:
        print(f"{a.dumps}: no dumps (stepS_layerL.safetensors in its texts' folders)", file=sys.stderr)
        return 2
    cache = os.path.join(a.dumps, f"bias-{a.recipe}")
    os.makedirs(cache, exist_ok=True)
    with concurrent.futures.ProcessPoolExecutor(a.threads) as pool:
        keys = [(os.path.basename(os.path.dirname(f)), *step_and_layer(f)) for f in files]
        caches = [os.path.join(cache, f"{t}_step{s}_layer{L}.json") for t, s, L in keys]
        results = list(pool.map(measure, files, caches, [a.recipe] * len(files)))
    steps = collections.defaultdict(list)  # (layer, head) -> [(text, step, counts)]
    for (text, step, layer), heads in zip(keys, results):
        for h, c in enumerate(heads):
            steps[layer, h].append((text, step, c))
    rows = sum(c["rows"] for v in steps.values() for _, _, c in v)
    tied = sum(c["tie_dominated_rows"] for v in steps.values() for _, _, c in v)
    one = sum(c["one_key_rows"] for v in steps.values() for _, _, c in v)
    head_steps = sum(len(v) for v in steps.values())
    positive = sum(c["coefficient_sum"] > 0 for v in steps.values() for _, _, c in v)
    print(f"{a.recipe}: {len(steps)} heads, {head_steps} head-steps over {len(files)} dumps, {rows:,} rows")
    print(f"  tied pair holding > 1 - 2^-9 of its row: {tied:,} rows; one key holding it: {one:,} rows")
    print(f"  delta's error summed over a head's rows: positive in {positive} of {head_steps} head-steps")
    print(f"heads where a regime holds at least {REGIME_SHARE:.0%} of a step's rows:")
    print(f"{'layer.head':>10} {'steps':>5} {'tied rows':>9} {'one-key rows':>12} {'+/-':>7} {'sign p':>8}")
    table = []
    for (layer, h), v in sorted(steps.items()):
        regime = [c for _, _, c in v if max(c["tie_dominated_rows"], c["one_key_rows"]) >= REGIME_SHARE * c["rows"]]
        pos = sum(c["coefficient_sum"] > 0 for _, _, c in v)
        neg = sum(c["coefficient_sum"] < 0 for _, _, c in v)
        entry = {"layer": layer, "head": h, "steps": len(v), "regime_steps": len(regime),
                 "tie_dominated_rows": sum(c["tie_dominated_rows"] for _, _, c in v),
                 "one_key_rows": sum(c["one_key_rows"] for _, _, c in v), "positive_steps": pos,
                 "negative_steps": neg, "sign_p": sign_test(pos, neg)}
        table.append(entry)
        if regime:
            print(f"{layer:>7}.{h:<2} {len(v):>5} {entry['tie_dominated_rows']:>9,} {entry['one_key_rows']:>12,} "
                  f"{pos:>3}/{neg:<3} {entry['sign_p']:>8.3g}")
    smallest = min(table, key=lambda e: e["sign_p"])
    print(f"smallest sign-test p over all {len(table)} heads: {smallest['sign_p']:.3g} "
          f"(layer {smallest['layer']} head {smallest['head']}, {smallest['positive_steps']}/"
          f"{smallest['negative_steps']}); below 0.05 by chance: about {0.05 * len(table):.0f} heads")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"recipe": a.recipe, "heads": table,
                       "head_steps": [{"layer": L, "head": h, "text": t, "step": s, **c}
                                      for (L, h), v in sorted(steps.items()) for t, s, c in v]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
