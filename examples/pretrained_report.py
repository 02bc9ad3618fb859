"""What `roundscope report` found on a pretrained model's dumps: the tables of docs/findings.md
beside the P-collapse ones (examples/pretrained_pcollapse.py).

    python -m roundscope.llama_dumps DUMPS --n 1024 --report     # dumps, then DUMPS/report
    python examples/pretrained_report.py DUMPS/report

Reads the report a layer at a time and prints, over every head and step: future leakage with
MXFP4 and MXFP8 V (leaking pairs, the largest move of O by a later token, parallel against
autoregressive O); the softmax headroom (heads with rows past FP16's limit under a naive softmax
without max subtraction, the rows an emulated FP16 kernel loses as NaN, Inf or zeros; BF16 and
FP32); the BF16 bias regime (rows where two keys at P-bar = 1 hold more than 1 - 2^-9 of the row,
rows where one key does, delta's error and its sign over the steps with the sign test);
attribution (the relative rms error of O of each recipe); and per layer the means.
"""
import argparse
import collections
import json
import os
import statistics
import sys


def lost_rows(rows, fmt, softmax):
    """Rows an emulated softmax ('shifted', 'online') lost in fmt, to NaN, Inf or zero."""
    return sum(r[fmt][f"emulated_{softmax}_nonfinite_rows"] + r[fmt][f"emulated_{softmax}_zero_rows"] for r in rows)


def spread(values) -> str:
    v = sorted(values)
    if not v:
        return "-"
    return f"min {v[0]:.4g}, mean {statistics.fmean(v):.4g}, median {v[len(v) // 2]:.4g}, max {v[-1]:.4g}"


def formats(head):
    return {f["format"]: f for f in head["headroom"]["formats"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", help="the folder `roundscope report` wrote (report.json, layers/)")
    a = p.parse_args(argv)
    path = os.path.join(a.report, "report.json")
    if not os.path.isfile(path):
        print(f"pretrained_report: {path}: no report there (run roundscope report first)", file=sys.stderr)
        return 2
    with open(path) as f:
        summary = json.load(f)
    rows = []  # one per head and step: the figures the tables need
    for layer in summary["layers"]:
        with open(os.path.join(a.report, layer["file"])) as f:
            for h in json.load(f)["heads"]:
                fm = formats(h)
                b = h.get("bias", {}).get("kernel")
                rows.append({
                    "layer": h["layer"], "head": h["head"], "step": h["step"],
                    "leak4": h.get("leak", {}).get("mxfp4"), "leak8": h.get("leak", {}).get("mxfp8_e4m3"),
                    "f16": fm["f16"], "bf16": fm["bf16"], "f32": fm["f32"], "rows": h["headroom"]["rows_total"],
                    "bias": b, "attribute": {r: x["all_low"] for r, x in h["attribute"].items()}})
    print(f"{len(rows)} head-steps in {len(summary['layers'])} layers, {len(summary['files'])} dumps")

    leak = [r for r in rows if r["leak4"]]
    if leak:
        for key, name in (("leak4", "MXFP4"), ("leak8", "MXFP8 (E4M3)")):
            tokens = leak[0][key]["tokens"]
            pairs = spread(r[key]["leaking_pairs"] for r in leak)
            moved = spread(r[key]["max_future_influence"] for r in leak)
            parallel = spread(r[key]["parallel_vs_autoregressive_max_abs_diff"] for r in leak)
            print(f"leakage, {name} V, first {tokens} tokens: leaking pairs {pairs}"
                  f" of {tokens * (tokens - 1) // 2}; largest move of O {moved};"
                  f" parallel vs autoregressive {parallel};"
                  f" heads with none {sum(r[key]['leaking_pairs'] == 0 for r in leak)}")

    total_rows = sum(r["rows"] for r in rows)
    for fmt in ("f16", "bf16", "f32"):
        past = [r for r in rows if r[fmt]["naive_sum_overflow_rows"] > 0]
        emulated = [r for r in rows if r[fmt]["emulated_naive_nonfinite_rows"] is not None]
        lost_nan = sum(r[fmt]["emulated_naive_nonfinite_rows"] for r in emulated)
        lost_zero = sum(r[fmt]["emulated_naive_zero_rows"] for r in emulated)
        print(f"headroom {fmt}: smallest naive margin {spread(r[fmt]['min_naive_margin'] for r in rows)} nats; "
              f"{len(past)} head-steps with rows past the limit, {sum(r[fmt]['naive_sum_overflow_rows'] for r in rows)}"
              f" of {total_rows} rows (exp alone {sum(r[fmt]['naive_exp_overflow_rows'] for r in rows)}); emulated on "
              f"{len(emulated)}: naive without max subtraction loses {lost_nan} rows as NaN/Inf and {lost_zero} as "
              f"zeros, with it {lost_rows(emulated, fmt, 'shifted')},"
              f" online {lost_rows(emulated, fmt, 'online')}")

    biased = [r for r in rows if r["bias"]]
    if biased:
        rows_b = sum(r["bias"]["rows"] for r in biased)
        print(f"bias regime (fa2-bf16, the kernel's O) over {len(biased)} head-steps, {rows_b} rows: "
              f"two keys at P-bar = 1 in {sum(r['bias']['tied_rows'] for r in biased)} rows, holding past 1 - 2^-9 in "
              f"{sum(r['bias']['tie_dominated_rows'] for r in biased)}; one key holding past 1 - 2^-9 in "
              f"{sum(r['bias']['one_key_rows'] for r in biased)} rows "
              f"({sum(r['bias']['one_key_rows'] > 0 for r in biased)} head-steps); "
              f"P-bar = 1 entries {sum(r['bias']['p_bar_one_count'] for r in biased)}")
        series = summary["bias_over_steps"]
        steps = max(len(s["steps"]) for s in series)
        one_sign = [s for s in series if len(s["steps"]) in (s["positive_steps"], s["negative_steps"])]
        significant = [s for s in series if s["sign_test_p"] < 0.05]
        print(f"delta's error over {steps} steps, {len(series)} heads: one sign in every step on {len(one_sign)} "
              f"({sum(s['positive_steps'] == len(s['steps']) for s in one_sign)} positive); sign test p < 0.05 on "
              f"{len(significant)}; positive steps {sum(s['positive_steps'] for s in series)} of "
              f"{sum(len(s['steps']) for s in series)}")

    recipes = sorted({name for r in rows for name in r["attribute"]})
    for name in recipes:
        print(f"relative rms error of O, {name}: {spread(r['attribute'][name] for r in rows)}")

    by_layer = collections.defaultdict(list)
    for r in rows:
        by_layer[r["layer"]].append(r)
    print("layer  leak4-pairs  f16-margin  f16-lost  one-key  tied  " + "  ".join(recipes))
    for layer in sorted(by_layer, key=lambda x: (x is None, x)):
        rs = by_layer[layer]
        lost = sum((r["f16"]["emulated_naive_nonfinite_rows"] or 0) + (r["f16"]["emulated_naive_zero_rows"] or 0)
                   for r in rs)
        pairs = statistics.fmean(r["leak4"]["leaking_pairs"] for r in rs) if rs[0]["leak4"] else float("nan")
        cells = [f"{pairs:11.0f}",
                 f"{min(r['f16']['min_naive_margin'] for r in rs):10.2f}", f"{lost:8d}",
                 f"{sum(r['bias']['one_key_rows'] for r in rs if r['bias']):7d}",
                 f"{sum(r['bias']['tied_rows'] for r in rs if r['bias']):4d}"]
        cells += [f"{statistics.fmean(r['attribute'][n] for r in rs):.4g}" for n in recipes]
        print(f"{layer!s:>5}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
