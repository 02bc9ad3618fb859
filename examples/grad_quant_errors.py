"""The quantized backward of seed 002's set-up (MXFP4 in the attention gradient's products,
stochastic rounding in the backward): how far dQ, dK and dV move from the exact gradients,
and whether they move with a sign.

    python examples/grad_quant_errors.py DUMP [--recipe fa2-bf16] [--seeds 8] [--threads 2]

DUMP is a .safetensors with q, k, v and do (a roundscope.dump or roundscope.llama_dumps file).
For each setting of `grad_quant` (none, mxfp8_e4m3, mxfp4) and `grad_rounding` (nearest,
stochastic; stochastic over --seeds seeds), every head's gradients are compared with the exact
ones (`roundscope truth`, rounded once to float64): rel_rms, and the slope of the emulated
gradient on the exact one (sum g_lp g / sum g^2; 1 for an unbiased gradient, below 1 where
the quantization shrinks it). For stochastic rounding, the mean over seeds too."""
import argparse
import sys

import numpy as np

import roundscope

SETTINGS = (("none", "nearest"), ("mxfp8_e4m3", "nearest"), ("mxfp8_e4m3", "stochastic"), ("mxfp4", "nearest"),
            ("mxfp4", "stochastic"))


def figures(g, exact) -> tuple[float, float]:
    """rel_rms and slope of g against exact (float64 arrays)."""
    rel = float(np.sqrt(((g - exact) ** 2).sum() / (exact ** 2).sum()))
    return rel, float((g * exact).sum() / (exact ** 2).sum())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump", help="a .safetensors with q, k, v, do")
    p.add_argument("--recipe", default="fa2-bf16")
    p.add_argument("--seeds", type=int, default=8, help="stochastic rounding: seeds 0 .. N-1")
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    if a.seeds < 1:
        print("--seeds: at least 1", file=sys.stderr)
        return 2
    if not 0 <= a.threads <= 1024:
        print(f"--threads: {a.threads} is not from 0 (all cores) to 1024", file=sys.stderr)
        return 2
    presets = [r["name"] for r in roundscope.recipes()["recipes"]]
    if a.recipe not in presets:
        print(f"--recipe: unknown recipe '{a.recipe}' (presets: {', '.join(presets)})", file=sys.stderr)
        return 2
    try:
        tensors, metadata = roundscope.read(a.dump), roundscope.read_metadata(a.dump)
    except (OSError, ValueError) as e:
        print(f"{a.dump}: {e}", file=sys.stderr)
        return 2
    missing = [n for n in ("q", "k", "v", "do") if n not in tensors]
    if missing:
        print(f"{a.dump}: no tensor {', '.join(repr(n) for n in missing)}", file=sys.stderr)
        return 2
    causal = metadata.get("causal", "false") == "true"
    q, k, v, do = (tensors[n] for n in ("q", "k", "v", "do"))
    try:
        table = rows(q, k, v, do, causal, a)
    except ValueError as e:  # shapes that do not fit together, and the like: the package's one line
        print(f"{a.dump}: {e}", file=sys.stderr)
        return 2
    for line in table:
        print(line)
    return 0


def rows(q, k, v, do, causal, a):
    """The table's lines: its header, then one line per setting."""
    exact = roundscope.truth(q, k, v, do=do, causal=causal, backward=True, threads=a.threads)
    names = ("dq", "dk", "dv")
    out = ["| grad_quant | grad_rounding | " + " | ".join(f"{n} rel_rms | {n} slope" for n in names) + " |",
           "|" + " --- |" * (2 + 2 * len(names))]
    for quant, rounding in SETTINGS:
        runs = []
        for seed in range(a.seeds if rounding == "stochastic" else 1):
            settings = {"grad_quant": quant, "grad_rounding": rounding, "grad_seed": seed}
            r = roundscope.attention(q, k, v, recipe=a.recipe, settings=settings, causal=causal, backward=True,
                                     do=do, threads=a.threads)
            runs.append({n: np.asarray(r[n], dtype=np.float64) for n in names})
        label = rounding if len(runs) == 1 else f"{rounding} (one seed; mean of {len(runs)})"
        cells = []
        for n in names:
            x = np.asarray(exact[n], dtype=np.float64)
            rel, slope = figures(runs[0][n], x)
            if len(runs) > 1:
                rel_m, slope_m = figures(np.mean([r[n] for r in runs], axis=0), x)
                cells += [f"{rel:.4f}; {rel_m:.4f}", f"{slope:.4f}; {slope_m:.4f}"]
            else:
                cells += [f"{rel:.4f}", f"{slope:.4f}"]
        out.append(f"| {quant} | {label} | " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    sys.exit(main())
