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
DUMPS/bias-RECIPE/ (a second run reads them; an entry that is not this very dump's result under
this recipe is measured again: examples/result_cache.py). Bad options and dumps (an unknown
recipe, --json naming an input, a file that is not a llama_dumps dump) stop it with one line
and exit 2 before any work."""
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
from head_split import head_inputs, launch_heads, problem  # noqa: E402
from result_cache import Refused, cached, measure_all, output_path, preset  # noqa: E402

REGIME_SHARE = 0.01  # a head-step where a regime holds at least this share of the rows


def measure(path: str, cache: str, recipe: str) -> tuple[list[dict], str]:
    """Each head of one dump: its rows, regime counts and delta's error sum (and how the cache
    answered: result_cache.cached)."""
    def heads() -> list[dict]:
        causal, scale = problem(path)
        tensors = roundscope.read(path)
        out = []
        for h in range(tensors["q"].shape[1]):
            r = roundscope.bias(head_inputs(tensors, h), recipe=recipe, causal=causal, softmax_scale=scale,
                                launch_heads=launch_heads(tensors), threads=1)
            out.append({"rows": r["rows"], "coefficient_sum": r["coefficient_sum"], "tied_rows": r["tied_rows"],
                        "tie_dominated_rows": r["tie_dominated_rows"], "one_key_rows": r["one_key_rows"]})
        return out
    # each head in its launch (launch_heads): entries measured before, each head a launch of its own, are not read
    return cached(cache, path, "pretrained_bias, heads in their launch", recipe, heads)


def step_and_layer(path: str) -> tuple[int, int]:
    m = re.search(r"step(\d+)_layer(\d+)\.safetensors$", path)
    if m is None:
        raise Refused(f"{path}: not a llama_dumps file name (stepS_layerL.safetensors)")
    return int(m.group(1)), int(m.group(2))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", help="a folder of python -m roundscope.llama_dumps (its texts' subfolders)")
    p.add_argument("--recipe", default="fa2-bf16-torch-compiled", help="the kernel whose delta is judged")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="dumps at once")
    p.add_argument("--json", help="also write every head-step's counts here")
    a = p.parse_args(argv)
    try:
        return run(a)
    except Refused as e:
        print(e, file=sys.stderr)
        return 2


def run(a) -> int:
    if a.threads < 1:
        raise Refused("--threads: at least 1")
    recipe = preset(a.recipe)
    files = sorted(glob.glob(os.path.join(a.dumps, "*", "step*_layer*.safetensors")))
    if not files:
        raise Refused(f"{a.dumps}: no dumps (stepS_layerL.safetensors in its texts' folders)")
    cache = os.path.join(a.dumps, f"bias-{recipe}")
    keys = [(os.path.basename(os.path.dirname(f)), *step_and_layer(f)) for f in files]
    caches = [os.path.join(cache, f"{t}_step{s}_layer{L}.json") for t, s, L in keys]
    json_out = output_path(a.json, files + caches)
    for f in files:
        problem(f)
    results = measure_all(concurrent.futures.ProcessPoolExecutor, a.threads, measure, files, cache, caches, recipe)
    steps = collections.defaultdict(list)  # (layer, head) -> [(text, step, counts)]
    for (text, step, layer), heads in zip(keys, results):
        for h, c in enumerate(heads):
            steps[layer, h].append((text, step, c))
    rows = sum(c["rows"] for v in steps.values() for _, _, c in v)
    tied = sum(c["tie_dominated_rows"] for v in steps.values() for _, _, c in v)
    one = sum(c["one_key_rows"] for v in steps.values() for _, _, c in v)
    head_steps = sum(len(v) for v in steps.values())
    positive = sum(c["coefficient_sum"] > 0 for v in steps.values() for _, _, c in v)
    print(f"{recipe}: {len(steps)} heads, {head_steps} head-steps over {len(files)} dumps, {rows:,} rows")
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
    if json_out:
        with replacing(json_out, "w") as (f, _):
            json.dump({"recipe": recipe, "heads": table,
                       "head_steps": [{"layer": L, "head": h, "text": t, "step": s, **c}
                                      for (L, h), v in sorted(steps.items()) for t, s, c in v]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
