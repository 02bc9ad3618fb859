"""`roundscope report`'s figures as TensorBoard event files, written with the tensorboard package's
own event writer, where its users already look at per-layer scalars over training steps.

    python -m roundscope._report_tensorboard REPORT.json LOGDIR [--run NAME] [--heads]

(`roundscope report DIR --tensorboard LOGDIR` runs it.) The events go into the run folder
LOGDIR/NAME (default: `report`; the command names the run after the dumps' folder), so that
runs written side by side show as runs. Every tag is `METRIC/layerLL`, with one value per layer
and step:
- each head figure of report_metrics: the mean over the layer's heads as a scalar, and the
  heads' values as a histogram, `METRIC/layerLL/heads`; with --heads each head's own scalar,
  `METRIC/layerLL/head H` (`batch B head H` in a batched dump);
- per dump with a kernel output, against each recipe: `compare/RECIPE/OUTPUT/rel_rms/layerLL`,
  the ulp distances as the histogram `compare/RECIPE/OUTPUT/ulps/layerLL`, and the values NaN on
  one side only, which have no distance, `compare/RECIPE/OUTPUT/nan_one_side/layerLL`;
- delta's error accumulated over steps, `bias/cumulative/layerLL` (the mean over the layer's
  heads; each head with --heads).
Steps without a number in the dumps' metadata are their files' positions.
"""
from __future__ import annotations

import math
import os
import re
import sys
import time
from collections import defaultdict
from statistics import mean

from . import _report_metrics as rm
from ._report_schema import ReportError, refuse


def _layer(x):
    return f"layer{x:02d}" if isinstance(x, int) else "layer_none"


def _ulp_bounds(label: str) -> tuple[float, float]:
    """'0', '1', '2-3', '4-7', ...: the ulps a bucket of the report's histogram covers."""
    numbers = [float(n) for n in re.findall(r"\d+", label)]
    if label.startswith(">"):
        return numbers[0], numbers[0] * 2
    return numbers[0], numbers[-1]


class Events:
    def __init__(self, logdir):
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.writer = EventFileWriter(logdir)
        self.wall_time = time.time()
        self.count = 0

    def _add(self, step, value):
        summary = self.summary_pb2.Summary(value=[value])
        self.writer.add_event(self.event_pb2.Event(wall_time=self.wall_time, step=int(step), summary=summary))
        self.count += 1

    def scalar(self, tag, step, x):
        if x is not None:
            self._add(step, self.summary_pb2.Summary.Value(tag=tag, simple_value=float(x)))

    def histogram(self, tag, step, buckets, values=None):
        """buckets: (low, high, count) in order; values: the values counted, sorted, where known
        (then the range and sums are theirs), else each count taken at its bucket's centre."""
        if not buckets:
            return
        if values is None:  # a count may be millions of values: their sums from the centres
            centres = [((lo + hi) / 2, c) for lo, hi, c in buckets]
            low, high = buckets[0][0], buckets[-1][1]
            total, squares = sum(x * c for x, c in centres), sum(x * x * c for x, c in centres)
        else:
            low, high = values[0], values[-1]
            total, squares = sum(values), sum(x * x for x in values)
        h = self.summary_pb2.HistogramProto(
            min=low, max=high, num=sum(c for _, _, c in buckets), sum=total, sum_squares=squares,
            bucket_limit=[hi for _, hi, _ in buckets], bucket=[float(c) for _, _, c in buckets])
        self._add(step, self.summary_pb2.Summary.Value(tag=tag, histo=h))

    def values_histogram(self, tag, step, values):
        """The values' distribution: one bucket per distinct value where there are few (a layer's
        heads), else 30 equal buckets over their range."""
        values = sorted(x for x in values if math.isfinite(x))  # an Inf has no bucket
        if not values:
            return
        distinct = sorted(set(values))
        if len(distinct) <= 30:
            buckets = [(x, x, values.count(x)) for x in distinct]
        else:
            lo, hi = values[0], values[-1]
            width = (hi - lo) / 30
            counts = [0] * 30
            for x in values:
                counts[min(29, int((x - lo) / width))] += 1
            buckets = [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]
        self.histogram(tag, step, buckets, values)

    def close(self):
        self.writer.close()


def _per_layer(events, metric, by_layer, heads):
    """by_layer {layer: {step: [(label, value)]}}: the mean as METRIC/layerLL, the heads' values
    as the histogram METRIC/layerLL/heads, each head's scalar where `heads`."""
    for layer, by_step in by_layer.items():
        for s in sorted(by_step):
            values = [x for _, x in by_step[s]]
            events.scalar(f"{metric}/{layer}", s, mean(values))
            events.values_histogram(f"{metric}/{layer}/heads", s, values)
            if heads:
                for label, x in by_step[s]:
                    events.scalar(f"{metric}/{layer}/{label}", s, x)


def _grouped():
    return defaultdict(lambda: defaultdict(list))


def export(report: dict, heads: list, compare: list, logdir: str, run: str = "report", per_head: bool = False) -> int:
    """Writes the figures of read_report's output into the run folder logdir/run; returns how many
    values it wrote."""
    events = Events(os.path.join(logdir, run))
    label, step = rm.head_labels(report), rm.steps(report)
    for m in rm.metrics(report, heads):
        by_layer = _grouped()
        for h in heads:
            x = m.value(h)
            if x is not None:
                by_layer[_layer(h.get("layer"))][step(h)].append((label(h), x))
        _per_layer(events, m.name, by_layer, per_head)
    position = {f["file"]: i for i, f in enumerate(report.get("files", []))}
    for f, recipe, output, o in rm.compare_figures(report, compare):
        s = f.get("step") if isinstance(f.get("step"), int) else position.get(f["file"], 0)
        base = f"compare/{recipe}/{output}"
        events.scalar(f"{base}/rel_rms/{_layer(f.get('layer'))}", s, rm.number(o.get("rel_rms")))
        histogram = o.get("ulp_histogram", [])
        buckets = [(*_ulp_bounds(b["ulps"]), b["count"]) for b in histogram if b["ulps"] != "nan"]
        events.histogram(f"{base}/ulps/{_layer(f.get('layer'))}", s, buckets)
        # A NaN on one side only has no distance: counted beside the histogram, not in it.
        events.scalar(f"{base}/nan_one_side/{_layer(f.get('layer'))}", s,
                      sum(b["count"] for b in histogram if b["ulps"] == "nan") if histogram else None)
    bias = _grouped()
    for series in report.get("bias_over_steps", []):
        for s, x in zip(series["steps"], series["cumulative"]):
            # a kernel's NaN made the sum "nan": it stays NaN in the layer's mean, not left out
            value = rm.figure(x)
            if value is not None:
                bias[_layer(series["layer"])][s].append((f"head {series['head']}", value))
    _per_layer(events, "bias/cumulative", bias, per_head)
    events.close()
    return events.count


def _run_name(name: str) -> str:
    """A run folder's name: one path component, printable."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or not name.isprintable():
        raise ReportError(f"--run: {name!r} is not a folder name (one path component, printable)")
    return name


def main(argv):
    program = "roundscope._report_tensorboard"
    usage = "usage: python -m roundscope._report_tensorboard REPORT.json LOGDIR [--run NAME] [--heads]"
    args, run, per_head = list(argv[1:]), "report", False
    if "--heads" in args:
        args.remove("--heads")
        per_head = True
    if "--run" in args:
        i = args.index("--run")
        if i + 1 >= len(args):
            refuse(program, usage)
        run = args.pop(i + 1)
        args.pop(i)
    if len(args) != 2 or any(a.startswith("--") for a in args):
        refuse(program, usage)
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        refuse(program, "no tensorboard in this Python (tools/setup.sh installs it in .venv)")
    try:
        run = _run_name(run)
        read = rm.read_report(args[0])
    except (ReportError, OSError) as e:  # nothing written
        refuse(program, e)
    print(export(*read, args[1], run=run, per_head=per_head))


if __name__ == "__main__":
    main(sys.argv)
