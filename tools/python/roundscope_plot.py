"""Plots of `roundscope demo`'s report: reads DIR/demo.json and writes PNGs beside it.

    python roundscope_plot.py DIR

pcollapse.png  the underflow fraction of non-sink P by KV order and static scale, with the
               closed-form prediction
bias.png       the coefficient of delta's rounding error summed over training steps
leak.png       leaking pairs and the parallel/autoregressive difference, without and with the fix
headroom.png   each row's largest score against ln(max) of float16 and float32
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def pcollapse(report, out):
    runs = report["pcollapse"]["runs"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = [f"{r['order']}\nS = {r['scale']:g}" for r in runs]
    ax.bar(range(len(runs)), [r["underflow_fraction"] for r in runs], color=["#c0392b" if r["order"] == "forward" else "#2980b9" for r in runs])
    ax.plot(range(len(runs)), [r["predicted_fraction_averaged"] for r in runs], "k_", markersize=30, label="prediction (forward order)")
    ax.set_xticks(range(len(runs)), labels)
    ax.set_ylabel("non-sink P cast to zero")
    ax.set_title("FP8 P-collapse behind an attention sink (Delta = 8)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "pcollapse.png"), dpi=120)


def bias(report, out):
    cumulative = report["bias"]["cumulative_coefficient"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(cumulative) + 1), cumulative, "o-")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("training step (synthetic)")
    ax.set_ylabel("sum of delta_lp - delta_hp")
    ax.set_title("BF16 running O: delta's rounding error accumulates")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bias.png"), dpi=120)


def leak(report, out):
    runs = [report["leak"]["without_fix"], report["leak"]["with_fix"]]
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.2))
    axes[0].bar(["no fix", "diagonal fix"], [r["leaking_pairs"] for r in runs], color=["#c0392b", "#27ae60"])
    axes[0].set_title("leaking (i, j > i) pairs")
    axes[1].bar(["no fix", "diagonal fix"], [r["parallel_vs_autoregressive_max_abs_diff"] for r in runs], color=["#c0392b", "#27ae60"])
    axes[1].set_title("parallel vs autoregressive |dO|")
    fig.suptitle("MXFP4 V quantized along tokens")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "leak.png"), dpi=120)


def headroom(report, out):
    h = report["headroom"]
    scores = [r["max_score"] for r in h["rows"]]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(scores, bins=40, color="#7f8c8d")
    for f in h["formats"]:
        if f["format"] in ("f16", "f32"):
            ax.axvline(f["ln_max"], color="#c0392b" if f["format"] == "f16" else "#2980b9", label=f"ln max {f['format']} = {f['ln_max']:.2f}")
    ax.set_xlabel("largest score of a row")
    ax.set_ylabel("rows")
    ax.set_title("naive softmax overflows past ln(max)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "headroom.png"), dpi=120)


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "demo.json")) as f:
        report = json.load(f)
    for plot in (pcollapse, bias, leak, headroom):
        plot(report, out)


if __name__ == "__main__":
    main()
