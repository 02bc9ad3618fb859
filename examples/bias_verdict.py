"""`roundscope bias` on every dump of examples/train_bias.py's three runs, per layer and head:
the coefficient sum(delta_lp - delta_hp) of each dump as that run's kernel forms delta, its
sign across dumps (an exact two-sided sign test), the tied keys' share of their rows, the
largest attention logit, and the mean cosine between the rank-1 terms x[T]^T (PK)[T] of dW^Q's
error (the paper's "nearly equal" matrices, measured on the model's own x), with the verdict
docs/findings.md applies:

    .venv/bin/python examples/bias_verdict.py bias-run [--roundscope build/roundscope] [--json OUT]

Ties dominate a head where at least 1 % of its rows (over every dump of the run without a fix)
end with tied keys holding more than 1 - 2^-9 of the row's P-bar. Confirmed: in such heads the
coefficient drifts positive (sign test p < 0.01) without a fix and not with either fix;
refuted: those heads show no consistent sign over at least 40 dumps; otherwise undecided (for
instance, no head where ties dominate: the regime the mechanism needs never forms).
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys

RUNS = {  # run -> (recipe settings of its kernel, where its delta's coefficient is in the JSON)
    "none": ([], None),
    "max-adjust": (["--set", "max_adjust=on"], None),
    "f32-delta": (["--fix"], "delta_from_f32_o"),
}


def sign_test(positive, negative):
    """Two-sided exact binomial test of positive against negative counts."""
    n, k = positive + negative, min(positive, negative)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # integers: exact for any n
    return min(1.0, 2 * tail)


def layer_files(run_dir, layer):
    files = glob.glob(os.path.join(run_dir, f"step*_layer{layer}.safetensors"))
    return sorted(files, key=lambda p: int(re.search(r"step(\d+)_", os.path.basename(p)).group(1)))


def analyse(binary, run, run_dir):
    settings, fix_key = RUNS[run]
    log = json.load(open(os.path.join(run_dir, "log.json")))
    layers = log["args"]["layers"]
    out = []
    for layer in range(layers):
        files = layer_files(run_dir, layer)
        p = subprocess.run([binary, "bias", *files, "--recipe", "fa2-bf16-torch", *settings, "--json"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bias_verdict: {run} layer {layer}: {p.stderr.strip()}")
        report = json.loads(p.stdout)
        steps = [s["fixes"][fix_key] if fix_key else s for s in report["steps"]]
        heads = len(steps[0]["query_weight"]["heads"])
        for h in range(heads):
            c = [s["query_weight"]["heads"][h]["coefficient_sum"] for s in steps]
            cosines = [s["query_weight"]["heads"][h]["rank1_cosine_similarity"] for s in report["steps"]]
            cosines = [x for x in cosines if isinstance(x, (int, float))]
            positive, negative = sum(x > 0 for x in c), sum(x < 0 for x in c)
            out.append({"run": run, "layer": layer, "head": h, "dumps": len(c), "cumulative": sum(c),
                        "positive": positive, "negative": negative, "sign_test_p": sign_test(positive, negative),
                        "rank1_cosine": sum(cosines) / len(cosines) if cosines else float("nan")})
        kernel = report["steps"]  # the run's forward kernel (a fix of delta leaves it as it is)
        n_q = log["args"]["context"]
        for entry in out[-heads:]:
            h = entry["head"]
            ties = [s["head_ties"][h] for s in kernel]
            tied = sum(t["tied_rows"] for t in ties)
            shares = [t["tie_share_mean"] for t in ties if t["tied_rows"] > 0]
            entry.update({"rows": n_q * len(ties), "tied_rows_fraction": tied / (n_q * len(ties)),
                          "tie_dominated_rows": sum(t["tie_dominated_rows"] for t in ties),
                          "tie_share_mean": sum(shares) / len(shares) if shares else 0.0,
                          "max_logit": max(d["max_logit"][layer] for d in log["dumps"]),
                          "final_loss": sum(log["steps"][-50:]) / len(log["steps"][-50:])})
    return out


def verdict(rows):
    unfixed = [r for r in rows if r["run"] == "none"]
    dominated = {(r["layer"], r["head"]) for r in unfixed if r["tie_dominated_rows"] >= 0.01 * r["rows"]}
    if not dominated:
        rare, total = sum(r["tie_dominated_rows"] for r in unfixed), sum(r["rows"] for r in unfixed)
        return (f"undecided: tied keys dominate no head (in {rare} of {total} rows they hold more than 1 - 2^-9 "
                "of the row's P-bar): the regime the mechanism needs never forms")
    by = {(r["run"], r["layer"], r["head"]): r for r in rows}
    drifts = [k for k in dominated if by[("none",) + k]["sign_test_p"] < 0.01 and by[("none",) + k]["cumulative"] > 0]
    fixed = all(by[(f,) + k]["sign_test_p"] >= 0.01 for k in drifts for f in ("max-adjust", "f32-delta"))
    if drifts and fixed:
        return f"confirmed in {len(drifts)} of {len(dominated)} heads where ties dominate"
    if all(by[("none",) + k]["dumps"] >= 40 and by[("none",) + k]["sign_test_p"] >= 0.01 for k in dominated):
        return f"refuted: no consistent sign over the dumps in the {len(dominated)} heads where ties dominate"
    return "undecided: a drift that a fix does not remove, or too few dumps"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("runs", help="the folder holding none/, max-adjust/ and f32-delta/")
    parser.add_argument("--roundscope", default=os.path.join(os.path.dirname(__file__), "..", "build", "roundscope"),
                        help="the roundscope binary")
    parser.add_argument("--json", help="also write the table as JSON here")
    a = parser.parse_args()
    rows = []
    for run in RUNS:
        run_dir = os.path.join(a.runs, run)
        if not os.path.isfile(os.path.join(run_dir, "log.json")):
            sys.exit(f"bias_verdict: {run_dir}: no finished run (log.json)")
        rows += analyse(a.roundscope, run, run_dir)
    print(f"{'run':10} {'layer':>5} {'head':>4} {'dumps':>5} {'cumulative':>11} {'+/-':>7} {'sign p':>8} "
          f"{'tied rows':>9} {'share':>7} {'dominated':>9} {'max logit':>9} {'rank-1 cos':>10} {'loss':>6}")
    for r in rows:
        print(f"{r['run']:10} {r['layer']:5} {r['head']:4} {r['dumps']:5} {r['cumulative']:+11.3e} "
              f"{r['positive']:>3}/{r['negative']:<3} {r['sign_test_p']:8.2g} {r['tied_rows_fraction']:9.4f} "
              f"{r['tie_share_mean']:7.4f} {r['tie_dominated_rows']:9} {r['max_logit']:9.2f} {r['rank1_cosine']:10.3f} "
              f"{r['final_loss']:6.3f}")
    v = verdict(rows)
    print(f"verdict: {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "verdict": v}, f, indent=1)


if __name__ == "__main__":
    main()
