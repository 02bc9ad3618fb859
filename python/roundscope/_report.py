"""`roundscope report` from Python, on this machine or on a distributed engine.

Locally it is the library's report (api/report/report_call.hpp), as the command runs it. With
`client` (a dask.distributed Client) every task of the report, one per head of each dump and
one per dump with a kernel output, runs as a Dask task on the cluster's workers (`run_task`,
the library's run of one task, as `roundscope report DIR --run-task KEY` runs it); the results
come back to this process as they finish, which writes them into OUT/cache under their keys
and shows progress, and a last local report gathers them into report.json and report.html
without recomputing anything. The workers read the dumps by the paths this process sees, so
DIR must be on a file system they share (or hold the same files at the same paths); OUT is
written here only. A task already in OUT/cache is not sent again.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Callable, Sequence
from typing import Any, cast

from . import _core


def load_report(out: str | os.PathLike = "roundscope-report") -> dict:
    """out/report.json with the results of its layer files joined in: "heads" and "compare",
    every task's result in full (for a report that fits in memory; a model's is read a layer at
    a time from out/layers/ instead)."""
    folder = os.fsdecode(out)
    with open(os.path.join(folder, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    report["heads"], report["compare"] = [], []
    for layer in report["layers"]:
        with open(os.path.join(folder, layer["file"]), encoding="utf-8") as f:
            content = json.load(f)
        report["heads"] += content["heads"]
        report["compare"] += content["compare"]
    return report


def list_tasks(dir: str | os.PathLike, out: str | os.PathLike = "roundscope-report", *,
               recipe: Sequence[str] | None = None, settings: Mapping | None = None, k_sink: int | None = None,
               rows: int | None = None, seed: int | None = None, fitted: str | os.PathLike | None = None) -> list[dict]:
    """The report's tasks (`roundscope report --list-tasks`): [{"key", "file", "head"}], one a
    head (a file's compare is gathered from its heads'), in the order --shard counts them."""
    options = dict(recipe=recipe, settings=settings, k_sink=k_sink, rows=rows, seed=seed,
                   fitted=None if fitted is None else os.fsdecode(fitted))
    listed = cast(dict[str, Any], _core.report_task_list(os.fsdecode(dir), os.fsdecode(out), **options))
    return list(listed["tasks"])


def run_task(dir: str | os.PathLike, key: str, file: str | os.PathLike | None = None, *,
             recipe: Sequence[str] | None = None, settings: Mapping | None = None, k_sink: int | None = None,
             rows: int | None = None, seed: int | None = None, fitted: str | os.PathLike | None = None,
             threads: int = 1) -> dict:
    """One task's result (`roundscope report --run-task KEY`), what OUT/cache/KEY.json holds:
    for an engine of your own. With `file` (the task's, as list_tasks names it) only that file
    is read; a ValueError if it changed since (no such task)."""
    options = dict(recipe=recipe, settings=settings, k_sink=k_sink, rows=rows, seed=seed,
                   fitted=None if fitted is None else os.fsdecode(fitted))
    task_file = None if file is None else os.fsdecode(file)
    return cast(dict[str, Any], _core.report_run_task(os.fsdecode(dir), key, file=task_file, **options,
                                                      threads=threads))


def _run_on_worker(dir, key: str, file: str, options: dict) -> dict:
    return run_task(dir, key, file, **options, threads=1)


def _write_atomically(path: str, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def print_progress(done: int, total: int, seconds: float) -> None:
    """The command's progress line, on standard error."""
    rate = done / seconds if seconds > 0 else 0.0
    left = f"{(total - done) / rate:.0f} s" if rate > 0 else "?"
    print(f"report: {done}/{total} tasks, {rate:.2f} tasks/s, {left} left", file=sys.stderr, flush=True)


def _gather(client, dir, out, options: dict, progress, every: float) -> int:
    """Runs every task not in OUT/cache on the cluster, writing each result as it comes back;
    returns how many ran there."""
    from distributed import as_completed

    tasks = list_tasks(dir, out, **options)
    cache = os.path.join(os.fsdecode(out), "cache")
    os.makedirs(cache, exist_ok=True)
    # An entry that is there but not a valid result is recomputed by the last local run.
    todo = [t for t in tasks if not os.path.isfile(os.path.join(cache, t["key"] + ".json"))]
    futures = client.map(_run_on_worker, [os.fsdecode(dir)] * len(todo), [t["key"] for t in todo],
                         [t["file"] for t in todo], [options] * len(todo),
                         key=[f"roundscope-{t['key']}" for t in todo], pure=False)
    task_of = {f.key: t for f, t in zip(futures, todo)}
    start = last = time.monotonic()
    for done, future in enumerate(as_completed(futures), 1):
        task = task_of[future.key]
        _write_atomically(os.path.join(cache, task["key"] + ".json"), json.dumps(future.result()))
        now = time.monotonic()
        if progress is not None and (done == len(todo) or now - last >= every):
            progress(done, len(todo), now - start)
            last = now
    return len(todo)


def report(dir: str | os.PathLike, out: str | os.PathLike = "roundscope-report", *,
           recipe: Sequence[str] | None = None, settings: Mapping | None = None, k_sink: int | None = None,
           rows: int | None = None, seed: int | None = None, fitted: str | os.PathLike | None = None, client=None,
           threads: int = 0, shard: str | None = None, tensorboard: str | os.PathLike | None = None,
           tensorboard_run: str | None = None, tensorboard_heads: bool = False, html: bool = True,
           progress: Callable[[int, int, float], None] | None = print_progress,
           progress_every: float = 10.0) -> dict:
    """Every analysis on every attention dump under dir (`roundscope report --json`): writes
    out/report.json and out/report.html (html=False: report.json alone) and returns the
    command's summary (report, html, tensorboard, files, tasks, cached, recomputed, seconds).

    client: a dask.distributed Client to run the tasks on (None: every core of this machine);
    then the summary's `cluster_tasks` says how many tasks ran on the cluster, and
    progress(done, total, seconds) is called as they finish (every progress_every seconds and
    at the end; default: the command's line on standard error; None: quiet), as it is for the
    tasks run here. shard "I/N": run that share of the tasks into out's cache
    and return the shard's summary (a call without it gathers). tensorboard: a folder for
    TensorBoard's event files of the figures, in its run folder tensorboard_run (default: dir's
    name), per layer (`METRIC/layerLL`; tensorboard_heads=True: each head's scalar too). rows:
    each head's analyses on a sample of that many query rows (at least 32), drawn from seed, every
    figure with its sampling error (`--rows`, `--seed`). settings: recipe keys changed in every
    recipe, as --set does (o_format=f32 to compare a float32 model's dumps). fitted: the file
    `roundscope fit DUMP --json` wrote, whose best recipe is compared too, named "fitted"
    (`--fitted`; settings leave it as it is)."""
    options = dict(recipe=recipe, settings=settings, k_sink=k_sink, rows=rows, seed=seed,
                   fitted=None if fitted is None else os.fsdecode(fitted))
    if client is not None and shard is not None:
        raise ValueError("shard: the cluster runs every task; give shard or client, not both")
    cluster_tasks = None
    if client is not None:
        cluster_tasks = _gather(client, dir, out, options, progress, progress_every)
    summary = cast(dict[str, Any], _core.report(
        os.fsdecode(dir), os.fsdecode(out), **options, shard=shard,
        tensorboard=None if tensorboard is None else os.fsdecode(tensorboard), tensorboard_run=tensorboard_run,
        tensorboard_heads=bool(tensorboard_heads), html=bool(html) or shard is not None, progress=progress,
        progress_every=progress_every, threads=threads))
    if cluster_tasks is not None:
        summary["cluster_tasks"] = cluster_tasks
    return summary
