"""Plots of roundscope's analyses: one PNG of an analysis's result (what its --json prints, or
what roundscope.pcollapse & co. return), drawn with matplotlib.

    import roundscope as rs, roundscope.plot
    roundscope.plot.plot("pcollapse", rs.pcollapse(n=1024), "pcollapse.png")

    roundscope bias ... --json | python -m roundscope.plot bias OUT.png

(`roundscope KIND ... --plot OUT.png` runs the latter from the installed package; `roundscope
demo` draws all of them.)

bias       the contribution of each feature dimension to delta's error; the coefficient summed
           over training steps (with the fixes, and the query-weight error when x is given),
           or the coefficient per recipe
pcollapse  the underflow fraction of non-sink P by KV order and static scale, with the
           prediction
leak       per query position, how far later tokens move O, and parallel against
           autoregressive O
headroom   each row's largest score against ln(max) of float16 and float32
attribute  the output error with one stage at a time low, and with one stage at a time exact
"""
import json
import os
import sys

RED, BLUE, GREEN, GREY = "#c0392b", "#2980b9", "#27ae60", "#7f8c8d"


def finite(values):
    """JSON numbers as floats; the report writes NaN and infinities as strings, and null."""
    out = []
    for v in values:
        out.append(float("nan") if v is None else float(v))
    return out


def cumulative_by_fix(ax, report, label):
    """The coefficient summed over steps, without and with each fix of the report's steps."""
    from matplotlib.ticker import MaxNLocator

    cumulative = finite(report["cumulative_coefficient"])
    steps = range(1, len(cumulative) + 1)
    ax.plot(steps, cumulative, "o-", color=RED, label=label)
    for key, color, name in (("max_adjust", GREEN, "max adjustment"),
                             ("delta_from_f32_o", BLUE, "delta from float32 O")):
        per_step = [s.get("fixes", {}).get(key) for s in report.get("steps", [])]
        if per_step and all(per_step):
            running, total = [], 0.0
            for s in per_step:
                total += float(s["coefficient_sum"])
                running.append(total)
            ax.plot(steps, running, "o-", color=color, label=name)
    ax.axhline(0, color=GREY, linewidth=0.8)
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("cumulative sum of delta_lp - delta_hp")


def bias_regimes(report, fig):
    """The demo: one panel per tie gap, the coefficient over steps without and with the fixes."""
    regimes = report["regimes"]
    axes = fig.subplots(1, len(regimes), sharey=True)
    for ax, r in zip(list(axes) if len(regimes) > 1 else [axes], regimes):
        cumulative_by_fix(ax, r, report["recipe"])
        share = sum(float(s["tie_share_mean"]) for s in r["steps"]) / len(r["steps"])
        ax.set_title(f"tie gap {r['tie_gap']:g}: the pair holds {100 * share:.2f} % of P-bar; "
                     f"{r['positive_steps']}/{len(r['steps'])} steps positive", fontsize=9)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("BF16 rounding bias of delta = rowsum(dO * O): where the tie decides the rounding, and where not")


def bias(report, fig):
    if "regimes" in report:
        return bias_regimes(report, fig)
    axes = fig.subplots(1, 2)
    source = report if "top_dims" in report else report["recipes"][0]
    dims = source["top_dims"]
    ax = axes[0]
    ax.bar([str(d["dim"]) for d in dims], finite(d["contribution"] for d in dims),
           color=[RED if float(d["contribution"]) > 0 else BLUE for d in dims])
    ax.axhline(0, color=GREY, linewidth=0.8)
    ax.set_xlabel("feature dimension j")
    ax.set_ylabel("sum_T dO[T,j] (O_lp - O_hp)[T,j]")
    ax.set_title(f"largest contributions, {source['recipe']}" + (" (step 1)" if "steps" in report else ""), fontsize=10)

    ax = axes[1]
    if "cumulative_coefficient" in report:
        cumulative_by_fix(ax, report, report.get("recipe", "recipe"))
        steps = range(1, len(report["cumulative_coefficient"]) + 1)
        ax.set_title("delta's error over steps")
        if "cumulative_dwq_error_norm" in report:
            twin = ax.twinx()
            twin.plot(steps, finite(report["cumulative_dwq_error_norm"]), "s--", color=GREY,
                      label="|sum of dW^Q errors|")
            twin.set_ylabel("|cumulative dW^Q error|_F", color=GREY)
            twin.legend(loc="lower right", fontsize=8)
        ax.legend(loc="upper left", fontsize=8)
    else:
        variants = report["recipes"] if "recipes" in report else [report] + list(report.get("fixes", {}).values())
        ax.bar(range(len(variants)), finite(v["coefficient_sum"] for v in variants), color=GREY)
        ax.set_xticks(range(len(variants)), [v["recipe"].replace(" with ", "\n+ ") for v in variants], fontsize=7)
        ax.axhline(0, color=GREY, linewidth=0.8)
        ax.set_ylabel("sum of delta_lp - delta_hp")
        ax.set_title("delta's error by recipe")
    fig.suptitle("BF16 rounding bias of delta = rowsum(dO * O)")


def pcollapse(report, fig):
    axes = fig.subplots(1, 2)
    for order, color in (("forward", RED), ("reverse", BLUE)):
        runs = sorted((r for r in report["runs"] if r["order"] == order), key=lambda r: r["scale"])
        if not runs:
            continue
        scales = [r["scale"] for r in runs]
        axes[0].plot(scales, finite(r["underflow_fraction"] for r in runs), "o-", color=color,
                     label=f"{order} KV order")
        axes[1].plot(scales, finite(r["mse"] for r in runs), "o-", color=color, label=f"{order} KV order")
        predicted = [(r["scale"], r["predicted_fraction"]) for r in runs if r.get("predicted_fraction") is not None]
        if predicted:
            axes[0].plot([s for s, _ in predicted], finite(p for _, p in predicted), "--", color=color, linewidth=1,
                         label=f"{order}: predicted")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("static scale S of P before the E4M3 cast")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("non-sink P cast to zero")
    axes[1].set_ylabel("mean squared error of O")
    axes[1].set_yscale("log")
    fig.suptitle("FP8 P-collapse: P below the E4M3 grid once the sink set the max")


def leak(report, fig):
    runs = report["runs"] if "runs" in report else [report]
    axes = fig.subplots(1, 2)
    for r in runs:
        label, color = ("diagonal fix", GREEN) if r.get("fix") else ("no fix", RED)
        by_position = r["by_position"]
        axes[0].plot(finite(by_position["future_influence"]), color=color, linewidth=0.8, label=label)
        axes[1].plot(finite(by_position["parallel_vs_autoregressive"]), color=color, linewidth=0.8, label=label)
    axes[0].set_title("max |change of O[i]| from a later V[j]", fontsize=9)
    axes[1].set_title("|O[i] parallel - O[i] autoregressive|", fontsize=9)
    for ax in axes:
        ax.set_xlabel("query position i")
        ax.legend(fontsize=8)
    fig.suptitle("Future leakage of V quantized in blocks along tokens")


def headroom(report, fig):
    ax = fig.subplots()
    ax.hist(finite(r["max_score"] for r in report["rows"]), bins=40, color=GREY)
    for f in report["formats"]:
        if f["format"] in ("f16", "f32"):
            ax.axvline(float(f["ln_max"]), color=RED if f["format"] == "f16" else BLUE,
                       label=f"ln max {f['format']} = {float(f['ln_max']):.2f}")
    ax.set_xlabel("largest score of a row")
    ax.set_ylabel("rows")
    ax.set_title("naive softmax overflows past ln(max)")
    ax.legend()


def attribute(report, fig):
    ax = fig.subplots()
    stages = report["stages"]
    names = [s["stage"] for s in stages]
    rows = range(len(stages))
    low = finite(s["only_this_low"] for s in stages)
    exact = finite(s["only_this_exact"] for s in stages)
    ax.barh([r + 0.2 for r in rows], low, height=0.4, color=RED, label="only this stage low")
    ax.barh([r - 0.2 for r in rows], exact, height=0.4, color=GREEN, label="only this stage exact")
    ax.axvline(float(report["all_low"]), color="black", linewidth=0.8, linestyle="--", label="recipe as is")
    smallest = min(x for x in low + exact + [float(report["all_low"])] if x == x and x > 0)
    for r, value in zip(rows, low):
        if value != value:  # no kernel runs this combination (e.g. float32 P on a tensor core)
            ax.text(smallest, r + 0.2, " n/a", va="center", fontsize=8)
    ax.set_yticks(list(rows), names)
    ax.set_xscale("log")
    ax.set_xlabel("relative rms error of O")
    ax.set_title(f"where the error of {report['recipe']} comes from")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))


KINDS = {"bias": (bias, (9, 3.8)), "pcollapse": (pcollapse, (9, 3.6)), "leak": (leak, (9, 3.5)),
         "headroom": (headroom, (6, 3.5)), "attribute": (attribute, (8.5, 3.6))}


def figure(kind: str, result: dict):
    """The matplotlib Figure of `result`, an analysis of `kind` (bias, pcollapse, leak,
    headroom, attribute)."""
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(result, dict):
        raise TypeError(f"result: expected an analysis's result (a dict), not {type(result).__name__}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    draw, size = KINDS[kind]
    fig = plt.figure(figsize=size)
    try:
        draw(result, fig)
    except (KeyError, TypeError, IndexError) as e:
        plt.close(fig)
        raise ValueError(f"result: not a {kind} result ({type(e).__name__}: {e})") from None
    fig.tight_layout()
    return fig


FORMATS = ("png", "pdf", "svg")


def format_of(path) -> str:
    """The drawing's format, by the name's extension (png, pdf or svg); ValueError for another."""
    suffix = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(f"path: '{os.fspath(path)}' names no format drawn here (.png, .pdf or .svg)")
    return suffix


def plot(kind: str, result: dict, path, format: str | None = None) -> None:
    """Draws `result`, an analysis of `kind`, into `path`, as PNG, PDF or SVG by its extension
    (or `format`, for a file whose name is not its own: a temporary one)."""
    path = os.fspath(path)
    format = format_of(path) if format is None else format
    if format not in FORMATS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        raise FileNotFoundError(f"path: no folder '{folder}'")
    fig = figure(kind, result)
    try:
        fig.savefig(path, dpi=120, format=format)
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)


def main(argv):
    """The writer `--plot` runs: one line and exit 2 on anything it cannot draw, as the command line."""
    from ._report_schema import refuse

    program = "roundscope.plot"
    if len(argv) not in (3, 4) or argv[1] not in KINDS:
        refuse(program, f"usage: python -m roundscope.plot {'|'.join(KINDS)} OUT.(png|pdf|svg) [FORMAT] (the "
                        "report's JSON on stdin)")
    # Read the whole report before importing matplotlib, so a writer never sees a closed pipe.
    try:
        report = json.load(sys.stdin)
    except (ValueError, RecursionError) as e:
        refuse(program, f"standard input: not a report's JSON ({e})")
    try:
        plot(argv[1], report, argv[2], argv[3] if len(argv) == 4 else None)
    except (ValueError, TypeError, OSError) as e:
        refuse(program, e)


if __name__ == "__main__":
    main(sys.argv)
