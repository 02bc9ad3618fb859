"""`roundscope report`'s figures as TensorBoard event files, written with the tensorboard package's
own event writer, where its users already look at per-layer scalars over training steps.

    python report_tensorboard.py OUT/report.json LOGDIR

(`roundscope report DIR --tensorboard LOGDIR` runs it.) Every head figure of report_metrics
becomes a scalar over steps, `NAME/layerLL/head H` (and `NAME/layerLL/mean` over the layer's
heads); the kernel's outputs against each recipe their relative rms error,
`compare/RECIPE/OUTPUT/rel_rms/layerLL`, and their distance from the emulation in ulps a
histogram, `compare/RECIPE/OUTPUT/ulps/layerLL` (and the values NaN on one side only, which have
no distance, `compare/RECIPE/OUTPUT/nan_one_side/layerLL`); delta's error accumulated over steps,
`bias/cumulative/layerLL/head H`. Steps without a number in the dumps' metadata are their
files' positions.
"""
from __future__ import annotations

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

    def histogram(self, tag, step, buckets):
        """buckets: (low, high, count) in order."""
        if not buckets:
            return
        total = sum(c for _, _, c in buckets)
        centres = [((lo + hi) / 2, c) for lo, hi, c in buckets]
        h = self.summary_pb2.HistogramProto(
            min=buckets[0][0], max=buckets[-1][1], num=total, sum=sum(x * c for x, c in centres),
            sum_squares=sum(x * x * c for x, c in centres), bucket_limit=[hi for _, hi, _ in buckets],
            bucket=[float(c) for _, _, c in buckets])
        self._add(step, self.summary_pb2.Summary.Value(tag=tag, histo=h))

    def close(self):
        self.writer.close()


def export(report: dict, heads: list, compare: list, logdir: str) -> int:
    """Writes the figures of read_report's output under logdir; returns how many values it wrote."""
    events = Events(logdir)
    label, step = rm.head_labels(report), rm.steps(report)
    for m in rm.metrics(report, heads):
        per_layer: defaultdict[str, defaultdict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for h in heads:
            x = m.value(h)
            events.scalar(f"{m.name}/{_layer(h.get('layer'))}/{label(h)}", step(h), x)
            if x is not None:
                per_layer[_layer(h.get("layer"))][step(h)].append(x)
        for layer, by_step in per_layer.items():
            for s in sorted(by_step):
                events.scalar(f"{m.name}/{layer}/mean", s, mean(by_step[s]))
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
    for series in report.get("bias_over_steps", []):
        for s, x in zip(series["steps"], series["cumulative"]):
            events.scalar(f"bias/cumulative/{_layer(series['layer'])}/head {series['head']}", s, rm.number(x))
    events.close()
    return events.count


def main(argv):
    program = "roundscope._report_tensorboard"
    if len(argv) != 3:
        refuse(program, "usage: python -m roundscope._report_tensorboard REPORT.json LOGDIR")
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        refuse(program, "no tensorboard in this Python (tools/setup.sh installs it in .venv)")
    try:
        read = rm.read_report(argv[1])
    except (ReportError, OSError) as e:  # nothing written
        refuse(program, e)
    print(export(*read, argv[2]))


if __name__ == "__main__":
    main(sys.argv)
