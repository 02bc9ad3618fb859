"""Where the BF16 bias of delta comes from: the decomposition tables of docs/findings.md.

    python examples/bias_decomposition.py [--recipe R] [--steps 8] [--n 512] [--threads 2] [--json]

On the repeated-max scenario (`roundscope bias --synthetic --tie-gap G --tied-keys T`: T
identical keys G above N(0, 1) competitors in every row, V and dO with mean -0.5, D = 64, 2
heads, `--steps` independent steps), the bias of `fa2-bf16-torch` (Qiu & Yao's released
attention) is split into the stages that round in BF16, by making them float32 one after the
other and taking each change:

    P-bar V and O   each block's P-bar V, the running O and the written O (o_accumulator, o_format)
    l               the row sum (row_sum_format)
    S and m         the scores and the row max (softmax_format)
    P cast          P-bar cast to BF16 before P-bar V, and that product (p_format, pv_product)
    rest            what is left: the score product, and delta summed in float32

Each term is the change in the sum of the steps' coefficients when its stage is made float32,
with the stages above it float32 already (a sequential decomposition: the terms add up to the
bias as is). Tables: T = 2 (a tied pair) and T = 1 (a single dominant key) for G = 8 to 20; the
same with Qiu & Yao's max adjustment (its residue); and the residue against the adjustment's
beta. Each cell is the sum over steps, with the steps of the sign of the sum in brackets.
Runs one `roundscope bias` per cell (1.5 s each at the defaults, 2 cores).

`--recipe fa2-bf16-torch-compiled` decomposes the same code as torch.compile runs it: Inductor
keeps the row sum in float32 within one 512-key bucket, so at N <= 512 it has no l stage; past
one bucket O's division reloads the BF16 row sums in some row blocks and the l stage is back."""
import argparse
import concurrent.futures
import json
import os
import sys

import roundscope

# Each stage's settings, cumulative: stage i makes stages 0..i float32.
STAGES = (
    ("P-bar V and O", {"o_accumulator": "f32", "o_format": "f32"}),
    ("l", {"row_sum_format": "f32"}),
    ("S and m", {"softmax_format": "f32"}),
    ("P cast", {"p_format": "f32", "pv_product": "f64"}),
)
GAPS = (8, 10, 12, 14, 16, 18, 20)
BETAS = (1.25, 1.5, 2, 4, 8)


RECIPES = ("fa2-bf16-torch", "fa2-bf16-torch-compiled")


BUCKET = 512  # the released code's buckets of keys


def stages_of(recipe: str, n: int):
    """The stages that round in BF16 under the recipe: the compiled one stores no l in one bucket."""
    return tuple(s for s in STAGES if not (recipe.endswith("-compiled") and n <= BUCKET and s[0] == "l"))


def cumulative_settings(stages, base: dict) -> list[dict]:
    """The settings of the recipe as is, then with each stage made float32 in turn."""
    out = [dict(base)]
    for _, s in stages:
        out.append({**out[-1], **s})
    return out


def bias_sum(a, gap: float, tied: int, settings: dict) -> tuple[float, int, int]:
    r = roundscope.bias(synthetic=True, n=a.n, heads=2, steps=a.steps, seed=a.seed, recipe=a.recipe,
                        settings=settings, tie_gap=gap, tied_keys=tied, threads=1)
    total = r["cumulative_coefficient"][-1]
    return total, r["positive_steps"], r["negative_steps"]


def decompose(pool, a, gap: float, tied: int, base: dict):
    """[(sum, positive, negative)] for as is, each stage's term, and the rest."""
    runs = list(pool.map(lambda s: bias_sum(a, gap, tied, s), cumulative_settings(stages_of(a.recipe, a.n), base)))
    terms = [runs[0]]
    for before, after in zip(runs, runs[1:]):
        terms.append((before[0] - after[0], None, None))
    terms.append(runs[-1])
    return terms


def cell(term) -> str:
    total, positive, negative = term
    if positive is None:
        return f"{total:+.1f}"
    same_sign = positive if total >= 0 else negative
    return f"{total:+.1f} ({same_sign}/{positive + negative})" if abs(total) >= 0.05 else f"{total:+.2g}"


def table(stages, title: str, first: str, rows) -> None:
    print(f"\n{title}\n")
    header = [first, "as is", *(f"{name} term" for name, _ in stages), "rest"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for label, terms in rows:
        print("| " + " | ".join([label, *(cell(t) for t in terms)]) + " |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", choices=RECIPES, default=RECIPES[0], help="the released code eager or compiled")
    p.add_argument("--steps", type=int, default=8, help="independent steps per cell (seeds seed, seed + 1, ...)")
    p.add_argument("--n", type=int, default=512, help="tokens")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gaps", type=float, nargs="+", default=GAPS, help="the tie gaps G")
    p.add_argument("--betas", type=float, nargs="+", default=BETAS, help="the max adjustment's beta values")
    p.add_argument("--beta-gaps", type=float, nargs="+", default=(12, 14, 16), help="the gaps of the beta sweep")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="runs at once")
    p.add_argument("--json", action="store_true", help="print the tables as one JSON object")
    a = p.parse_args(argv)
    if a.steps < 1 or a.n < 3 or a.threads < 1:
        print("--steps, --threads: at least 1; --n: at least 3", file=sys.stderr)
        return 2
    tables = []  # (title, first column, [(label, terms)])
    with concurrent.futures.ThreadPoolExecutor(a.threads) as pool:
        for tied, what in ((2, "a tied pair (T = 2)"), (1, "a single dominant key (T = 1)")):
            tables.append((f"{a.recipe}, {what}: the bias and its terms", "G",
                           [(f"{g:g}", decompose(pool, a, g, tied, {})) for g in a.gaps]))
            tables.append((f"with the max adjustment (beta 2), {what}: its residue and the residue's terms", "G",
                           [(f"{g:g}", decompose(pool, a, g, tied, {"max_adjust": "on"})) for g in a.gaps]))
        for g in a.beta_gaps:
            tables.append((f"the max adjustment's residue against beta, T = 2, G = {g:g}", "beta",
                           [(f"{b:g}", decompose(pool, a, g, 2, {"max_adjust": "on", "max_adjust_beta": f"{b:g}"}))
                            for b in a.betas]))
    if a.json:
        names = ["as is", *(name for name, _ in stages_of(a.recipe, a.n)), "rest"]
        json.dump([{"title": t, "rows": [{"label": label, **{n: {"sum": x[0], "positive_steps": x[1],
                                                                  "negative_steps": x[2]}
                                                              for n, x in zip(names, terms)}}
                                         for label, terms in rows]} for t, _, rows in tables], sys.stdout)
        print()
    else:
        for t in tables:
            table(stages_of(a.recipe, a.n), *t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
