"""roundscope.torch.monitor: attention numerics while a model trains.

Every `freq` steps from `start_step`, the chosen layers' attention calls of that step are
captured (q, k, v and o in the forward pass, do in the backward pass, as roundscope.dump
captures them) and analysed as `roundscope report` analyses a dump, on a sample of `rows` query
rows a head: sink mass, P-collapse under the FP8 recipe, the softmax's headroom per format,
delta's rounding bias, future leakage, and the kernel's outputs against each compared recipe.
The figures go to TensorBoard in the report's layout (the run folder logdir/run, a layer's mean
as METRIC/layerLL and its heads' values as the histogram METRIC/layerLL/heads) and to a
JSON-lines file, one line a head and step. They are the report's figures by construction: the
step's capture is a dump and its analysis the report's own (api/report/), so `roundscope report`
on the same step's dump gives the same numbers.

    monitor = roundscope.torch.monitor("runs", freq=100, layers=[0, 15, 29], rows=64)
    for step, batch in enumerate(loader):
        with monitor.step(step):                # around forward and backward
            loss = model(batch).loss
            loss.backward()
        optimizer.step()

Steps that are not logged cost one comparison. A logged step costs its capture (a copy of each
chosen layer's tensors) and the analyses, after the backward pass: choose layers, rows and freq
to fit the budget (docs/python.md).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence

from . import _report, _report_metrics, _report_tensorboard
from .dump import AttentionDump


def _whole(name: str, x, low: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < low:
        raise ValueError(f"{name}: must be an integer from {low}, not {x!r}")
    return x


class monitor:
    """Attention numerics every `freq` steps of a training run (see the module's text).

    logdir: TensorBoard's log folder (None: none), the events in its run folder `run`; jsonl: a
    JSON-lines file of every head's figures (None: none); freq, start_step: the logged steps are
    start_step, start_step + freq, ...; layers: the attention calls of a step to analyse, counted
    from 0 in call order (None: all); rows: query rows a head sampled (at least 32; 0: every row),
    drawn from seed; recipes and settings: the recipes the kernel's outputs are compared against
    (settings change every one of them); k_sink: the sink's keys for P-collapse; heads: also each
    head's own scalar in TensorBoard; keep: a folder to keep each logged step's dumps and report in
    (stepS/dumps, stepS/report), for `roundscope report` on them; threads: the analyses' threads."""

    def __init__(self, logdir: str | os.PathLike | None = None, *, run: str = "monitor",
                 jsonl: str | os.PathLike | None = None, freq: int = 100, start_step: int = 0,
                 layers: Iterable[int] | None = None, rows: int = 64, seed: int = 0,
                 recipes: Sequence[str] = ("fa2-bf16",), settings: Mapping | None = None, k_sink: int = 1,
                 heads: bool = False, keep: str | os.PathLike | None = None, threads: int = 0):
        if logdir is None and jsonl is None and keep is None:
            raise ValueError("logdir: the monitor writes nowhere (give logdir, jsonl or keep)")
        self.freq = _whole("freq", freq, 1)
        self.start_step = _whole("start_step", start_step, 0)
        self.rows = _whole("rows", rows, 0)
        if 0 < self.rows < 32:
            raise ValueError(f"rows: a sample needs at least 32 rows (0: every row), not {rows}")
        if isinstance(recipes, str) or not all(isinstance(r, str) for r in recipes):
            raise TypeError("recipes: expected a sequence of recipe names such as ['fa2-bf16']")
        if settings is not None and not isinstance(settings, Mapping):
            raise TypeError("settings: expected a mapping of recipe keys to values")
        if not isinstance(run, str) or not run or os.sep in run or run in (".", ".."):
            raise ValueError(f"run: {run!r} is not a folder name")
        self.layers = None if layers is None else sorted({_whole("layers", x, 0) for x in layers})
        self.logdir = None if logdir is None else os.fsdecode(logdir)
        self.jsonl = None if jsonl is None else os.fsdecode(jsonl)
        self.keep = None if keep is None else os.fsdecode(keep)
        self.run, self.heads, self.seed, self.k_sink = run, bool(heads), seed, k_sink
        self.recipes, self.settings, self.threads = list(recipes), dict(settings or {}), threads
        self.logged_steps: list[int] = []  # the steps analysed so far

    def logged(self, step: int) -> bool:
        """Whether `step` is one the monitor analyses."""
        return step >= self.start_step and (step - self.start_step) % self.freq == 0

    @contextlib.contextmanager
    def step(self, step: int):
        """Around one training step's forward and backward passes: on a logged step, its attention
        calls are captured and, once the block ends without an error, analysed and written."""
        _whole("step", step, 0)
        if not self.logged(step):
            yield self
            return
        with contextlib.ExitStack() as stack:
            if self.keep is None:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="roundscope-monitor-"))
            else:
                folder = os.path.join(self.keep, f"step{step}")
                os.makedirs(folder, exist_ok=True)
            dumps = os.path.join(folder, "dumps")
            dump = AttentionDump(dumps, layers=self.layers, steps=[step])
            with dump.step(step):
                yield self
            if dump.written:
                self._analyse(step, dumps, os.path.join(folder, "report"))
            self.logged_steps.append(step)

    def _analyse(self, step: int, dumps: str, out: str) -> None:
        _report.report(dumps, out, recipe=self.recipes, settings=self.settings or None, k_sink=self.k_sink,
                       rows=self.rows or None, seed=self.seed if self.rows else None, html=False, progress=None,
                       threads=self.threads)
        report, heads, compare = _report_metrics.read_report(os.path.join(out, "report.json"))
        if self.logdir is not None:
            _report_tensorboard.export(report, heads, compare, self.logdir, self.run, self.heads)
        if self.jsonl is not None:
            label = _report_metrics.head_labels(report)
            with open(self.jsonl, "a", encoding="utf-8") as f:
                for h in heads:
                    values = {k: (v if v is None or v == v and abs(v) != float("inf") else str(v))
                              for k, v in h["values"].items()}
                    f.write(json.dumps({"step": step, "layer": h.get("layer"), "head": h["head"],
                                        "label": label(h), "values": values}) + "\n")
