"""The figures of `roundscope report`'s output, one table of them, for the pages and exports that
read it (report_page.py: the HTML page; report_tensorboard.py: TensorBoard's event files), and
the reading of that output: report.json and its layer files, one layer at a time.

A head's figure is a Metric: its name (a TensorBoard tag, an HTML id), what it is in words, how
to read it from one head's result, and when a value is bad enough to be pointed at (the page
highlights it and names the worst heads first). The report writes NaN and infinities as
strings and a figure it did not compute as null: a head's figure reads the strings as the float
they name (a NaN figure is a finding, not a gap) and null as None.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from . import _report_schema as schema


def number(x):
    """A JSON number as a finite float; None for null, strings ("nan", "inf"), an integer past
    the floats and anything else."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        x = float(x)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def figure(x):
    """A head's figure: a JSON number as a float, and "nan", "inf", "-inf" (how the report writes
    them) as those floats; None for null (not computed) and anything else."""
    if x in ("nan", "inf", "-inf"):
        return float(x)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        return float(x)
    except OverflowError:
        return None


def finite(x) -> bool:
    """Whether a figure can be drawn: a number, not NaN or an infinity."""
    return x is not None and math.isfinite(x)


# A figure is read from `src` at a place found in `head`: src is the head's result itself, or
# its sampling errors (the "sampling_error" of a sampled report), which have the result's shape.
def _dig(x, path):
    for k in path:
        if isinstance(k, int):
            x = x[k] if isinstance(x, list) and k < len(x) else None
        else:
            x = x.get(k) if isinstance(x, dict) else None
    return x


def _at(*path):
    return lambda head, src: figure(_dig(src, path))


def _index(items, match):
    return next((i for i, x in enumerate(items) if isinstance(x, dict) and match(x)), None)


def _listed(head, path):
    x = _dig(head, path)
    return x if isinstance(x, list) else []


def _run_index(head, order, scale):
    return _index(_listed(head, ("pcollapse", "runs")),
                  lambda run: run.get("order") == order and number(run.get("scale")) == scale)


def pcollapse_run(head, order, scale):
    i = _run_index(head, order, scale)
    return None if i is None else head["pcollapse"]["runs"][i]


def _run_figure(order, scale, key):
    def get(head, src):
        i = _run_index(head, order, scale)
        return None if i is None else figure(_dig(src, ("pcollapse", "runs", i, key)))
    return get


def _headroom(fmt, key):
    def get(head, src):
        i = _index(_listed(head, ("headroom", "formats")), lambda f: f.get("format") == fmt)
        return None if i is None else figure(_dig(src, ("headroom", "formats", i, key)))
    return get


def _leak(fmt, key):
    return _at("leak", fmt, key)


def _sum(*getters):
    def get(head, src):
        if src is not head:
            return None  # a sum's error would need the covariance of its terms
        xs = [g(head, src) for g in getters]
        return None if any(x is None for x in xs) else figure(sum(xs))
    return get


def _bias(key):
    return _at("bias", "kernel", key)


@dataclass(frozen=True)
class Metric:
    name: str                      # a tag and an id: letters, digits, '_'
    section: str                   # the analysis it belongs to
    label: str                     # what it is, for a person
    get: Callable[[dict, dict], float | None]  # (head, where to read): see _dig
    threshold: tuple[str, float] | None  # (">=", ">" or "<", t): a value worth pointing at
    worst: str = "max"                   # which end is worst: "max", "min" or "abs"
    unit: str = "share"                  # what its values count: charts put one unit on an axis
    total: bool = False                  # a total over the head's query rows: a sampled head's value
                                         # (report --rows) is scaled up to an estimate of the whole head
    structural: str | None = None        # why the recipe itself puts every head past the threshold:
                                         # then a fact of the recipe, not a finding on each head

    def bad(self, x: float) -> bool:
        """Past the threshold; a NaN always, threshold or none (a figure that is no number is a
        failure to point at)."""
        if math.isnan(x):
            return True
        if self.threshold is None:
            return False
        op, t = self.threshold
        return x >= t if op == ">=" else x > t if op == ">" else x < t

    def value(self, head: dict) -> float | None:
        """The figure of a head as read_report gives it."""
        return head["values"].get(self.name)

    def error(self, head: dict) -> float | None:
        """Its sampling error, where the head's rows were sampled and the figure has one."""
        return head.get("errors", {}).get(self.name)

    def threshold_text(self) -> str:
        return "" if self.threshold is None else f"{self.threshold[0]} {self.threshold[1]:g}"


SECTIONS = {
    "sink": "Attention sinks",
    "pcollapse": "P-collapse (fa3-fp8: E4M3 P, 128-key tiles)",
    "leak": "Future leakage (block-quantized V)",
    "headroom": "Softmax headroom",
    "bias": "delta = rowsum(dO * O): the BF16 rounding bias",
}

LEAK_IS_STRUCTURAL = ("V quantized along tokens shares one scale across a block of 32 tokens, so under a causal "
                      "mask a later token moves an earlier query's O on any head: a property of the format, which "
                      "an unquantized diagonal tile removes (--set diagonal_fix=true)")

HEAD_METRICS = [
    Metric("sink_mass", "sink", "mass on the sink (exact softmax)", _at("pcollapse", "sink_mass"), (">=", 0.5)),
    Metric("score_spread", "sink", "spread of the non-sink scores (nats)", _at("pcollapse", "score_spread"), (">=", 4),
           unit="nats"),
    Metric("pcollapse_fwd_s1", "pcollapse", "P cast to zero, forward, S = 1",
           _run_figure("forward", 1, "underflow_fraction"), (">=", 0.5)),
    Metric("pcollapse_fwd_s1_predicted", "pcollapse", "predicted from the held scores, forward, S = 1",
           _run_figure("forward", 1, "predicted_fraction_empirical"), None),
    Metric("pcollapse_rev_s1", "pcollapse", "P cast to zero, reverse, S = 1",
           _run_figure("reverse", 1, "underflow_fraction"), (">=", 0.5)),
    Metric("pcollapse_fwd_s256", "pcollapse", "P cast to zero, forward, S = 256",
           _run_figure("forward", 256, "underflow_fraction"), (">=", 0.1)),
    Metric("pcollapse_rev_s256", "pcollapse", "P cast to zero, reverse, S = 256",
           _run_figure("reverse", 256, "underflow_fraction"), (">=", 0.1)),
    # leakage is measured on the head's first tokens, sampled or not: its counts are not scaled
    Metric("leak_mxfp4_pairs", "leak", "leaking (query, later key) pairs, MXFP4 V", _leak("mxfp4", "leaking_pairs"),
           (">", 0), unit="pairs", structural=LEAK_IS_STRUCTURAL),
    Metric("leak_mxfp4_influence", "leak", "largest move of O by a later token, MXFP4 V",
           _leak("mxfp4", "max_future_influence"), (">", 0), unit="move of O", structural=LEAK_IS_STRUCTURAL),
    Metric("leak_mxfp8_pairs", "leak", "leaking pairs, MXFP8 (E4M3) V", _leak("mxfp8_e4m3", "leaking_pairs"),
           (">", 0), unit="pairs", structural=LEAK_IS_STRUCTURAL),
    Metric("headroom_f16_margin", "headroom", "smallest margin to f16 overflow, naive softmax (nats)",
           _headroom("f16", "min_naive_margin"), ("<", 0), worst="min", unit="nats"),
    Metric("headroom_f16_overflow_rows", "headroom", "rows whose naive f16 sum overflows",
           _headroom("f16", "naive_sum_overflow_rows"), (">", 0), unit="rows", total=True),
    Metric("headroom_f16_lost_rows", "headroom", "rows of O an emulated naive f16 softmax loses (NaN, Inf or zeros)",
           _sum(_headroom("f16", "emulated_naive_nonfinite_rows"), _headroom("f16", "emulated_naive_zero_rows")),
           (">", 0), unit="rows", total=True),
    Metric("bias_coefficient", "bias", "delta's error summed over rows (the kernel's O)", _bias("coefficient_sum"),
           None, worst="abs", unit="sum of coefficients", total=True),
    Metric("bias_tied_rows", "bias", "rows with two keys at P-bar = 1", _bias("tied_rows"), (">", 0), unit="rows",
           total=True),
    Metric("bias_one_key_rows", "bias", "rows one key at P-bar = 1 holds past 1 - 2^-9 (l rounds to 1)",
           _bias("one_key_rows"), (">", 0), unit="rows", total=True),
    Metric("bias_tie_dominated_rows", "bias", "rows two keys at P-bar = 1 hold past 1 - 2^-9",
           _bias("tie_dominated_rows"), (">", 0), unit="rows", total=True),
]


def attribute_metric(recipe):
    """The relative rms error of O with every stage of `recipe` low (attribution)."""
    return Metric(f"attribute_{''.join(c if c.isalnum() else '_' for c in recipe)}", "attribute",
                  f"relative rms error of O, {recipe}",
                  _at("attribute", recipe, "all_low"), (">=", 0.05), unit="relative rms error")


def candidate_metrics(report):
    """Every head metric, with one attribution metric per recipe of the report."""
    recipes = [r["name"] for r in report.get("options", {}).get("recipes", [])]
    return HEAD_METRICS + [attribute_metric(r) for r in recipes]


def metrics(report, heads):
    """The metrics that some head of read_report's has a value for."""
    return [m for m in candidate_metrics(report) if any(m.value(h) is not None for h in heads)]


def _slim_compare(c):
    keep = ("rel_rms", "matched", "total", "max_ulp")
    errors = c.get("sampling_error", {})
    return {"file": c["file"], "layer": c.get("layer"), "step": c.get("step"),
            "compare": {recipe: {"skipped": x["skipped"]} if "skipped" in x else
                        {"outputs": {name: {**{k: o.get(k) for k in keep}, "ulp_histogram": o.get("ulp_histogram", []),
                                            "rel_rms_error": number(_dig(errors, (recipe, "outputs", name, "rel_rms")))}
                                     for name, o in x["outputs"].items()}}
                        for recipe, x in c.get("compare", {}).items()}}


def compare_skipped(compare):
    """(file, recipe, why) for each recipe the report did not compare with a file's kernel
    outputs (the kernel wrote other dtypes than the recipe does)."""
    for c in compare:
        for recipe, x in c.get("compare", {}).items():
            if "skipped" in x:
                yield c["file"], recipe, x["skipped"]


def read_report(path):
    """(report, heads, compare): report.json at `path` and the results its layer files hold, read
    one layer at a time and cut down to the figures, so that memory holds one layer's results and
    not the model's. A head is {file, layer, step, head, values: {metric name: value}, profile: its
    [score gaps, P binades] histograms or None}; a compare
    keeps each output's rel_rms, matched, total, max_ulp and ulp_histogram. A sampled head (report
    --rows) also has errors: {metric name: its sampling error}; its totals over rows (Metric.total)
    are estimates for the whole head, the sample's sums scaled by sample_scale."""
    report = _load(path)
    schema.check_report(report, path)
    candidates = candidate_metrics(report)
    heads, compare = [], []
    for i, layer in enumerate(report.get("layers", [])):
        layer_file = schema.layer_path(path, layer["file"], f"{path}: layers[{i}].file")
        content = _load(layer_file)
        schema.check_layer(content, layer_file)
        for h in content.get("heads", []):
            up = sample_scale(h)
            heads.append({"file": h["file"], "layer": h.get("layer"), "step": h.get("step"), "head": h["head"],
                          "values": {m.name: _scaled(m, m.get(h, h), up) for m in candidates},
                          "profile": profile(h), "worst": worst_element(h)})
            if isinstance(h.get("sampling_error"), dict):
                heads[-1]["errors"] = {m.name: _scaled(m, m.get(h, h["sampling_error"]), up) for m in candidates}
        compare += [_slim_compare(c) for c in content.get("compare", [])]
    return report, heads, compare


def profile(head):
    """A head's profile for the page's per-head view, or None where the report has none (written
    before it had them): [score gaps, P binades] (pcollapse's histograms), then, where the report
    has them, [sink mass by position (3 digits; None: no row), the bins' first positions, the
    most collapsing rows as [row, keys, counted, sink mass or None], their run's order and scale]
    (checked by check_layer; numbers and two fixed words only)."""
    p = head.get("pcollapse") if isinstance(head.get("pcollapse"), dict) else {}
    if not all(k in p for k in schema.PROFILE_KEYS):
        return None
    out = [p[k] for k in schema.PROFILE_KEYS]
    if "sink_mass_by_position" in p and "collapsing_rows" in p:
        run = p.get("collapsing_rows_run") if isinstance(p.get("collapsing_rows_run"), dict) else {}
        order = run.get("order") if run.get("order") in ("forward", "reverse") else None
        scale = number(run.get("scale"))
        out += [[_digits(x) for x in p["sink_mass_by_position"]], p["position_bins"],
                [[r["row"], r["keys"], r["counted"], _digits(r.get("sink_mass"))] for r in p["collapsing_rows"]],
                [order, scale if scale is not None and math.isfinite(scale) else None]]
    return out


def worst_element(head):
    """The head's element of O furthest from the exact attention, as the per-head view shows it:
    [recipe, its share of O's bits, row, column, kernel, truth, recipe's value, ulps from it (None:
    not finite)] for the recipe that matches most of the head's O (the first on a tie); None where
    the report has no compare for the head (checked by check_layer)."""
    best = None
    for recipe, outputs in (head.get("compare_worst") or {}).items():
        o = outputs.get("o")
        if not o or not o["worst"] or not o["total"]:
            continue
        share = o["matched"] / o["total"]
        if best is None or share > best[1]:
            best = (recipe, share, o["worst"][0])
    if best is None:
        return None
    recipe, share, w = best
    index = w["index"]
    values = [w[k] if isinstance(w[k], str) else figure(w[k]) for k in ("kernel", "truth", "recipe")]
    return [recipe, round(share, 4), index[-2] if len(index) >= 2 else None, index[-1] if index else None,
            *values, w.get("ulp")]


def _digits(x):
    """A share to 3 significant digits for the page; None where it has none."""
    x = number(x)
    return None if x is None or not math.isfinite(x) else float(f"{x:.3g}")


def sample_scale(head) -> float:
    """How many of a head's query rows each sampled row stands for (report --rows: `of` / `rows`);
    1 for a head run whole."""
    sample = head.get("sample") if isinstance(head.get("sample"), dict) else {}
    rows, of = number(sample.get("rows")), number(sample.get("of"))
    return of / rows if rows and of and 0 < rows < of else 1.0


def _scaled(metric, x, up):
    """A total over a head's rows as an estimate for the whole head (its sampling error alike)."""
    return figure(x * up) if metric.total and x is not None and up != 1.0 else x


def _load(path):
    """A report file's JSON; ReportError where it is not JSON (OSError where it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise schema.ReportError(f"{path}: not a JSON file roundscope wrote ({str(e).splitlines()[0][:200]})") from None


def compare_figures(report, compare):
    """(file entry, recipe, output, its comparison) for each kernel output the report compared."""
    files = {f["file"]: f for f in report.get("files", [])}
    for c in compare:
        for recipe, x in c.get("compare", {}).items():
            for output, o in x.get("outputs", {}).items():
                yield files.get(c["file"], {"file": c["file"]}), recipe, output, o


def batch_heads(report):
    """A function giving a head its (batch entry, head within it): the report's flat head index
    split by its file's heads per batch entry (the model's head is the second); (None, the flat
    index) where the file does not say how many heads a batch entry holds."""
    files = {f["file"]: f for f in report.get("files", []) if isinstance(f, dict)}

    def split(head):
        per_batch = files.get(head["file"], {}).get("heads_per_batch")
        if isinstance(per_batch, int) and not isinstance(per_batch, bool) and per_batch > 0:
            return divmod(head["head"], per_batch)
        return None, head["head"]
    return split


def head_labels(report):
    """A function naming a head: 'head H', or 'batch B head H' where its file has a batch."""
    files = {f["file"]: f for f in report.get("files", []) if isinstance(f, dict)}
    split = batch_heads(report)

    def label(head):
        batch, within = split(head)
        if batch is not None and files.get(head["file"], {}).get("batch", 1) > 1:
            return f"batch {batch} head {within}"
        return f"head {head['head']}"
    return label


def steps(report):
    """A function giving a head its step: from the dump's metadata, else its file's position."""
    position = {f["file"]: i for i, f in enumerate(report.get("files", []))}
    return lambda head: head["step"] if isinstance(head.get("step"), int) else position.get(head["file"], 0)
