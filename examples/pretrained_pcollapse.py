"""P-collapse on every head of a pretrained model's dumps: the tables of docs/findings.md.

    python -m roundscope.llama_dumps DUMPS --n 1024          # SmolLM2-135M, two texts, all layers
    python examples/pretrained_pcollapse.py DUMPS [--threads 2] [--recipe fp8-p-cast-only]

For every dump under DUMPS it runs `roundscope pcollapse --recipe fa3-fp8 --k-sink 1
--without-sink` (the first token is the sink; forward and reverse KV order, S = 1 and 256; each
run again with the sink key replaced by its neighbour), then prints, over all heads: the
measured underflow and the underflow without the sink; how far the normal model and the count
of the held scores are from the measure; how far the paper's closed form (forward order) is, by
the heads' sink mass; how many heads reverse order with S = 256 leaves with no underflow (or
under 0.1 %); the two remedies' MSE of O against each other; where the sinks form (from the
first layer whose median head puts 0.25 on the first token); and per layer the median sink
mass and score spread and the mean underflow of each run. Each head is measured alone
(examples/head_split.py; in its dump's launch, for PyTorch's split choices), so that it also
prints, head by head, the share of the underflow the sink causes and reverse order's gain in the
MSE of O. --recipe fp8-p-cast-only is the paper's own set-up (float32 Q, K and V, only P cast to
E4M3); a recipe that holds P in BF16 or float32 (PyTorch's kernels, torch-*-sm90) is measured
at S = 1 in both orders, with how many non-sink P reach zero, and without the FP8 remedies'
lines. Results are kept in DUMPS/pcollapse/ (DUMPS/pcollapse-RECIPE/ for another recipe; a
second run reads them, and measures again an entry that is not this very dump's result:
examples/result_cache.py). Bad options and dumps stop it with one line and exit 2 before any
work."""
import argparse
import collections
import concurrent.futures
import os
import statistics
import sys

import roundscope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from head_split import head_inputs, launch_heads, problem  # noqa: E402
from result_cache import Refused, cached, measure_all, preset  # noqa: E402

FP8_RUNS = (("forward", 1.0), ("forward", 256.0), ("reverse", 1.0), ("reverse", 256.0))
# A recipe that holds P in a wider format (the production BF16 and FP16 kernels) has no static
# scale to apply: its P is measured as it is, in both KV orders.
WIDE_RUNS = (("forward", 1.0), ("reverse", 1.0))
FP8 = {"e4m3", "e5m2"}
SINK_LAYER = 0.25  # a layer's median sink mass from which the sinks count as formed
SINK_CLASSES = (("sink mass >= 0.5", 0.5, 2), ("0.1 to 0.5", 0.1, 0.5), ("under 0.1", -1, 0.1))


def runs_of(recipe: str) -> tuple:
    """The (order, S) runs measured under `recipe`: S = 1 and 256 where P is cast to FP8."""
    settings = next(r["settings"] for r in roundscope.recipes()["recipes"] if r["name"] == recipe)
    return FP8_RUNS if settings["p_format"] in FP8 else WIDE_RUNS


def measure(path: str, cache: str, recipe: str = "fa3-fp8") -> tuple[dict, str]:
    """pcollapse on each head of a dump alone: {"heads": [its head entry, with "mse": {"ORDER S":
    the MSE of its O}]} (the dump's MSE is the heads' mean: equal sizes)."""
    def heads() -> dict:
        causal, scale = problem(path)
        tensors = roundscope.read(path)
        out = []
        for h in range(tensors["q"].shape[1]):
            r = roundscope.pcollapse(head_inputs(tensors, h, ("q", "k", "v")), recipe=recipe, k_sink=1,
                                     scale=sorted({s for _, s in runs_of(recipe)}), without_sink=True,
                                     causal=causal, softmax_scale=scale, threads=1,
                                     launch_heads=launch_heads(tensors))
            out.append({**r["heads"][0], "head": h, "mse": {f"{x['order']} {x['scale']:g}": x["mse"]
                                                            for x in r["runs"]}})
        return {"heads": out}
    return cached(cache, path, "pretrained_pcollapse, heads in their launch", recipe, heads)


def spread(values) -> str:
    v = sorted(values)
    return f"mean {statistics.fmean(v):.3f}, median {v[len(v) // 2]:.3f}, max {v[-1]:.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", help="a folder of attention dumps (python -m roundscope.llama_dumps)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="files measured at once")
    p.add_argument("--recipe", default="fa3-fp8", help="the FP8 recipe (default: fa3-fp8)")
    a = p.parse_args(argv)
    try:
        return run(a)
    except Refused as e:
        print(e, file=sys.stderr)
        return 2


def layer_of(path: str) -> int:
    layer = roundscope.read_metadata(path).get("layer", "-1")
    if not layer.lstrip("-").isdigit():
        raise Refused(f"{path}: metadata layer {layer!r} is not a whole number")
    return int(layer)


def run(a) -> int:
    if a.threads < 1:
        raise Refused("--threads: at least 1")
    recipe = preset(a.recipe)
    runs = runs_of(recipe)
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(a.dumps) for f in names
                   if f.endswith(".safetensors"))
    if not files:
        raise Refused(f"{a.dumps}: no .safetensors dumps")
    for f in files:
        problem(f)
    layers = [layer_of(f) for f in files]
    out = os.path.join(a.dumps, "pcollapse" if recipe == "fa3-fp8" else f"pcollapse-{recipe}")
    caches = [os.path.join(out, os.path.relpath(f, a.dumps).replace(os.sep, "_") + ".json") for f in files]
    results = measure_all(concurrent.futures.ThreadPoolExecutor, a.threads, measure, files, out, caches, recipe)

    heads = []  # (layer, head's dict, its runs by (order, scale))
    for layer, r in zip(layers, results):
        for h in r["heads"]:
            heads.append((layer, h, {(x["order"], x["scale"]): x for x in h["runs"]}))
    print(f"{len(heads)} heads in {len(files)} dumps")
    for run in runs:
        x = [h[2][run] for h in heads]
        normal = [abs(y["underflow_fraction"] - y["predicted_fraction"]) for y in x]
        counted = [abs(y["underflow_fraction"] - y["predicted_fraction_empirical"]) for y in x]
        print(f"{run[0]} S={run[1]:g}: underflow {spread(y['underflow_fraction'] for y in x)}; without the sink "
              f"{spread(y['underflow_without_sink'] for y in x)}; normal model off by up to {max(normal):.4f} "
              f"(over 0.02 on {sum(e > 0.02 for e in normal)} heads); held scores counted off by up to "
              f"{max(counted):.5f}")
        zeros = sum(round(y["underflow_fraction"] * y["counted"]) for y in x)
        print(f"  {zeros} of {sum(y['counted'] for y in x)} non-sink P at zero; heads with any: "
              f"{sum(y['underflow_fraction'] > 0 for y in x)}, the most {max(y['underflow_fraction'] for y in x):.3g}")
    # The seed's own predictor, the closed form from each head's effective Delta and spread (forward
    # order), by how much of its attention the head puts on the sink.
    for run in [r for r in runs if r[0] == "forward"]:
        for name, low, high in SINK_CLASSES:
            x = [h[2][run] for h in heads if low <= h[1]["sink_mass"] < high]
            off = sorted(abs(y["underflow_fraction"] - y["closed_form_fraction"]) for y in x
                         if y.get("closed_form_fraction") is not None)
            if off:
                print(f"{run[0]} S={run[1]:g}, heads with {name}: closed form off by median {off[len(off) // 2]:.4f}, "
                      f"max {off[-1]:.4f} (within 0.01 on {sum(e <= 0.01 for e in off)} of {len(off)} heads)")
    if runs == FP8_RUNS:
        remedies(heads, results)
    # The sink's share of a head's underflow (forward order, S = 1): what replacing it removes.
    for name, low, high in SINK_CLASSES:
        share = sorted(1 - h[2][runs[0]]["underflow_without_sink"] / h[2][runs[0]]["underflow_fraction"]
                       for h in heads if low <= h[1]["sink_mass"] < high and h[2][runs[0]]["underflow_fraction"] > 0)
        if share:
            print(f"the sink's share of the underflow (forward S=1), heads with {name}: median "
                  f"{share[len(share) // 2]:.2f}, most of it on {sum(x > 0.5 for x in share)} of {len(share)} heads")
    by_layer(heads, runs)
    return 0


def remedies(heads: list, results: list) -> None:
    """The two remedies of the seed (reverse KV order, S = 256), alone and together."""
    left = [h[2][("reverse", 256.0)]["underflow_fraction"] for h in heads]
    print(f"reverse order with S = 256 leaves no underflow on {sum(x == 0 for x in left)} of {len(heads)} heads, "
          f"under 0.1 % on {sum(x < 0.001 for x in left)}")
    strongest = max(heads, key=lambda h: h[1]["sink_mass"])
    print(f"  on the strongest sink head (layer {strongest[0]} head {strongest[1]['head']}, sink mass "
          f"{strongest[1]['sink_mass']:.2f}) it leaves {strongest[2][('reverse', 256.0)]['underflow_fraction']:.3f} "
          f"(forward order, S = 1: {strongest[2][FP8_RUNS[0]]['underflow_fraction']:.3f})")
    # The MSE of O per dump (the heads' mean) and per head, under each remedy.
    mse = [{run: statistics.fmean(h["mse"][f"{run[0]} {run[1]:g}"] for h in r["heads"]) for run in FP8_RUNS}
           for r in results]
    ratio = sorted(m[("reverse", 1.0)] / m[("forward", 256.0)] for m in mse)
    print("MSE of O, reverse order (S = 1) over S = 256 (forward order), per dump: "
          f"median {ratio[len(ratio) // 2]:.2f}, "
          f"range {ratio[0]:.2f} to {ratio[-1]:.2f}")
    for scale in (1.0, 256.0):
        gain = sorted(m[("forward", scale)] / m[("reverse", scale)] for m in mse)
        print(f"MSE of O, forward order over reverse (S = {scale:g}), per dump: median {gain[len(gain) // 2]:.2f}, "
              f"range {gain[0]:.2f} to {gain[-1]:.2f}")
    for scale in (1.0, 256.0):
        for name, low, high in SINK_CLASSES:
            gain = sorted(h[1]["mse"][f"forward {scale:g}"] / h[1]["mse"][f"reverse {scale:g}"] for h in heads
                          if low <= h[1]["sink_mass"] < high)
            if gain:
                print(f"MSE of O, forward order over reverse (S = {scale:g}), heads with {name}: median "
                      f"{gain[len(gain) // 2]:.2f}, range {gain[0]:.2f} to {gain[-1]:.2f}, below 1 on "
                      f"{sum(g < 1 for g in gain)} of {len(gain)}")


def by_layer(heads: list, runs: tuple) -> None:
    """Where the sinks form, and each layer's median sink mass, score spread and mean underflow."""
    layers = collections.defaultdict(list)
    for h in heads:
        layers[h[0]].append(h)
    median = {layer: sorted(h[1]["sink_mass"] for h in hs)[len(hs) // 2] for layer, hs in layers.items()}
    # Where the sinks are: from the first layer whose median head puts at least SINK_LAYER on
    # the first token.
    first = min((layer for layer in layers if median[layer] >= SINK_LAYER), default=None)
    if first is not None:
        late = sorted(h[1]["sink_mass"] for h in heads if h[0] >= first)
        early = sorted(median[layer] for layer in layers if layer < first)
        print(f"the first token as a sink: from layer {first} on (the first whose median head puts at least "
              f"{SINK_LAYER} on it) the median head puts {late[len(late) // 2]:.2f} on it, "
              f"{sum(x >= 0.5 for x in late)} of {len(late)} heads at least 0.5, the most {late[-1]:.2f}"
              + (f"; before it, layer medians {early[0]:.2f} to {early[-1]:.2f}" if early else ""))
    print("layer  sink mass (median)  score spread (median)  " + "  ".join(f"{o} S={s:g}" for o, s in runs)
          + "  forward S=1 without the sink")
    for layer in sorted(layers):
        hs = layers[layer]
        spread_median = sorted(h[1]["score_spread"] for h in hs)[len(hs) // 2]
        means = [statistics.fmean(h[2][run]["underflow_fraction"] for h in hs) for run in runs]
        alone = statistics.fmean(h[2][runs[0]]["underflow_without_sink"] for h in hs)
        print(f"{layer:5d}  {median[layer]:18.2f}  {spread_median:21.2f}  " + "  ".join(f"{m:13.3f}" for m in means)
              + f"  {alone:13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
