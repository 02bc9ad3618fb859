"""Delta's error on the same heads under several kernels: whether its sign in a head-step belongs
to the data or to the kernel's rounding, for docs/findings.md's production-recipe table.

    python examples/pretrained_bias.py DUMPS --recipe R --json R.json     # for each kernel R
    python examples/bias_across_kernels.py R1.json R2.json [...]

Each file is pretrained_bias.py's --json of one recipe over the same dumps. For the first recipe
against each other it prints, over the head-steps both measured: how often delta's error summed
over the head's rows has the same sign, the correlation of those sums, and the ratio of their
typical sizes (root mean square); then each recipe's regime rows and heads below p = 0.05. Files
that are not such results, or that cover other head-steps, stop it with one line and exit 2."""
import argparse
import json
import math
import statistics
import sys


class Refused(Exception):
    pass


def load(path: str) -> tuple[str, dict, list]:
    """(recipe, {(layer, head, text, step): delta's error sum}, heads) of one --json file."""
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        steps = {(s["layer"], s["head"], s["text"], s["step"]): float(s["coefficient_sum"]) for s in r["head_steps"]}
        heads = [(float(h["sign_p"]), int(h["tie_dominated_rows"]), int(h["one_key_rows"])) for h in r["heads"]]
        name = str(r["recipe"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise Refused(f"{path}: not a pretrained_bias.py --json result ({type(e).__name__}: {e})") from None
    if not all(math.isfinite(v) for v in steps.values()):
        raise Refused(f"{path}: a head-step's coefficient_sum is not a finite number")
    if not steps:
        raise Refused(f"{path}: no head-steps")
    return name, steps, heads


def correlation(x: list[float], y: list[float]) -> str:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return f"{sxy / math.sqrt(sxx * syy):+.3f}" if sxx > 0 and syy > 0 else "undefined (one side constant)"


def rms(x: list[float]) -> float:
    return math.sqrt(statistics.fmean(v * v for v in x))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="pretrained_bias.py --json files, the reference first")
    a = p.parse_args(argv)
    try:
        loaded = [load(f) for f in a.results]
        keys = set(loaded[0][1])
        for f, (_, steps, _) in zip(a.results, loaded):
            if set(steps) != keys:
                raise Refused(f"{f}: other head-steps than {a.results[0]} (the same dumps are needed)")
    except Refused as e:
        print(e, file=sys.stderr)
        return 2
    ref_name, ref, _ = loaded[0]
    order = sorted(keys)
    x = [ref[k] for k in order]
    print(f"{len(order)} head-steps; reference {ref_name} (rms of delta's error sum {rms(x):.3g})")
    for name, steps, _ in loaded[1:]:
        y = [steps[k] for k in order]
        same = sum((u > 0) == (v > 0) for u, v in zip(x, y) if u != 0 and v != 0)
        both = sum(u != 0 and v != 0 for u, v in zip(x, y))
        share = f" ({same / both:.1%})" if both else ""
        ratio = f" ({rms(y) / rms(x):.2f}x)" if rms(x) > 0 else ""
        print(f"  {name}: same sign in {same} of {both} head-steps{share}, correlation {correlation(x, y)}, "
              f"rms {rms(y):.3g}{ratio}")
    for name, steps, heads in loaded:
        positive = sum(v > 0 for v in steps.values())
        low = sum(p < 0.05 for p, _, _ in heads)
        smallest = f", the smallest {min(p for p, _, _ in heads):.3g}" if heads else ""
        print(f"{name}: positive in {positive} of {len(steps)} head-steps; tied-pair rows "
              f"{sum(t for _, t, _ in heads):,}, one-key rows {sum(o for _, _, o in heads):,}; "
              f"{low} of {len(heads)} heads below p = 0.05{smallest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
