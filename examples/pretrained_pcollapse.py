"""P-collapse on every head of a pretrained model's dumps: the tables of docs/findings.md.

    python -m roundscope.llama_dumps DUMPS --n 1024          # SmolLM2-135M, two texts, all layers
    python examples/pretrained_pcollapse.py DUMPS [--threads 2] [--recipe fp8-p-cast-only]

For every dump under DUMPS it runs `roundscope pcollapse --recipe fa3-fp8 --k-sink 1
--without-sink` (the first token is the sink; forward and reverse KV order, S = 1 and 256; each
run again with the sink key replaced by its neighbour), then prints, over all heads: the
measured underflow and the underflow without the sink; how far the normal model and the count
of the held scores are from the measure; how far the paper's closed form (forward order) is, by
the heads' sink mass; how many heads reverse order with S = 256 leaves with
no underflow; the two remedies' MSE of O against each other; and per layer the median sink
mass and the mean underflow of each run. --recipe fp8-p-cast-only is the paper's own set-up
(float32 Q, K and V, only P cast to E4M3). Results are kept in DUMPS/pcollapse/ (DUMPS/pcollapse-
RECIPE/ for another recipe; a second run reads them)."""
import argparse
import collections
import concurrent.futures
import json
import os
import statistics
import sys

import roundscope
from roundscope.dump import replacing

RUNS = (("forward", 1.0), ("forward", 256.0), ("reverse", 1.0), ("reverse", 256.0))


def measure(path: str, cache: str, recipe: str = "fa3-fp8") -> dict:
    if os.path.isfile(cache):
        with open(cache) as f:
            return json.load(f)
    r = roundscope.pcollapse(path, recipe=recipe, k_sink=1, without_sink=True, threads=1)
    with replacing(cache, "w") as (f, _):  # a name of its own: never a file already there
        json.dump(r, f)
    return r


def spread(values) -> str:
    v = sorted(values)
    return f"mean {statistics.fmean(v):.3f}, median {v[len(v) // 2]:.3f}, max {v[-1]:.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", help="a folder of attention dumps (python -m roundscope.llama_dumps)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="files measured at once")
    p.add_argument("--recipe", default="fa3-fp8", help="the FP8 recipe (default: fa3-fp8)")
    a = p.parse_args(argv)
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(a.dumps) for f in names
                   if f.endswith(".safetensors"))
    if not files:
        print(f"{a.dumps}: no .safetensors dumps", file=sys.stderr)
        return 2
    out = os.path.join(a.dumps, "pcollapse" if a.recipe == "fa3-fp8" else f"pcollapse-{a.recipe}")
    os.makedirs(out, exist_ok=True)
    caches = [os.path.join(out, os.path.relpath(f, a.dumps).replace(os.sep, "_") + ".json") for f in files]
    with concurrent.futures.ThreadPoolExecutor(a.threads) as pool:
        results = list(pool.map(measure, files, caches, [a.recipe] * len(files)))

    heads = []  # (layer, head's dict, its runs by (order, scale))
    for f, r in zip(files, results):
        layer = int(roundscope.read_metadata(f).get("layer", -1))
        for h in r["heads"]:
            heads.append((layer, h, {(x["order"], x["scale"]): x for x in h["runs"]}))
    print(f"{len(heads)} heads in {len(files)} dumps")
    for run in RUNS:
        x = [h[2][run] for h in heads]
        normal = [abs(y["underflow_fraction"] - y["predicted_fraction"]) for y in x]
        counted = [abs(y["underflow_fraction"] - y["predicted_fraction_empirical"]) for y in x]
        print(f"{run[0]} S={run[1]:g}: underflow {spread(y['underflow_fraction'] for y in x)}; without the sink "
              f"{spread(y['underflow_without_sink'] for y in x)}; normal model off by up to {max(normal):.4f} "
              f"(over 0.02 on {sum(e > 0.02 for e in normal)} heads); held scores counted off by up to "
              f"{max(counted):.5f}")
    # The seed's own predictor, the closed form from each head's effective Delta and spread (forward
    # order), by how much of its attention the head puts on the sink.
    for run in RUNS[:2]:
        for name, low, high in (("sink mass >= 0.5", 0.5, 2), ("0.1 to 0.5", 0.1, 0.5), ("under 0.1", -1, 0.1)):
            x = [h[2][run] for h in heads if low <= h[1]["sink_mass"] < high]
            off = sorted(abs(y["underflow_fraction"] - y["closed_form_fraction"]) for y in x
                         if y.get("closed_form_fraction") is not None)
            if off:
                print(f"{run[0]} S={run[1]:g}, heads with {name}: closed form off by median {off[len(off) // 2]:.4f}, "
                      f"max {off[-1]:.4f} (within 0.01 on {sum(e <= 0.01 for e in off)} of {len(off)} heads)")
    none = sum(h[2][("reverse", 256.0)]["underflow_fraction"] == 0 for h in heads)
    print(f"reverse order with S = 256 leaves no underflow on {none} of {len(heads)} heads")
    mse = [{(x["order"], x["scale"]): x["mse"] for x in r["runs"]} for r in results]
    ratio = sorted(m[("reverse", 1.0)] / m[("forward", 256.0)] for m in mse)
    print("MSE of O, reverse order (S = 1) over S = 256 (forward order), per dump: "
          f"median {ratio[len(ratio) // 2]:.2f}, "
          f"range {ratio[0]:.2f} to {ratio[-1]:.2f}")
    for scale in (1.0, 256.0):
        gain = sorted(x["mse_gain_over_forward"] for r in results for x in r["runs"]
                      if x["order"] == "reverse" and x["scale"] == scale and x.get("mse_gain_over_forward") is not None)
        if gain:
            print(f"MSE of O, forward order over reverse (S = {scale:g}), per dump: median {gain[len(gain) // 2]:.2f}, "
                  f"range {gain[0]:.2f} to {gain[-1]:.2f}")
    by_layer = collections.defaultdict(list)
    for h in heads:
        by_layer[h[0]].append(h)
    print("layer  sink mass (median)  " + "  ".join(f"{o} S={s:g}" for o, s in RUNS) + "  forward S=1 without the sink")
    for layer in sorted(by_layer):
        hs = by_layer[layer]
        mass = sorted(h[1]["sink_mass"] for h in hs)[len(hs) // 2]
        means = [statistics.fmean(h[2][run]["underflow_fraction"] for h in hs) for run in RUNS]
        alone = statistics.fmean(h[2][RUNS[0]]["underflow_without_sink"] for h in hs)
        print(f"{layer:5d}  {mass:18.2f}  " + "  ".join(f"{m:13.3f}" for m in means) + f"  {alone:13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
