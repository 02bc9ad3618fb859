"""`roundscope report` from Python, on this machine or on a distributed engine.

Locally it is the command itself. With `client` (a dask.distributed Client) every task of the
report, one per head of each dump and one per dump with a kernel output, runs as a Dask task
on the cluster's workers (`roundscope report DIR --run-task KEY`, in process on the worker);
the results come back to this process, which writes them into OUT/cache under their keys, and
a last local `roundscope report` gathers them into report.json and report.html without
recomputing anything. The workers read the dumps by the paths this process sees, so DIR must
be on a file system they share (or hold the same files at the same paths); OUT is written here
only. A task already in OUT/cache is not sent again.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

from . import _commands


def _arguments(dir, out, recipe, k_sink) -> list[str]:
    return ["report", os.fsdecode(dir), "-o", os.fsdecode(out), *_commands.flags(recipe=recipe, k_sink=k_sink)]


def _run_task(arguments: list[str], key: str, file: str) -> dict:
    """On a worker: one task's result (reading only its own file)."""
    return _commands.run([*arguments, "--run-task", key, "--task-file", file, "--threads", "1", "--json"])[1]


def _write_atomically(path: str, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def report(dir: str | os.PathLike, out: str | os.PathLike = "roundscope-report", *,
           recipe: Sequence[str] | None = None, k_sink: int | None = None, client=None,
           threads: int = 0) -> dict:
    """Every analysis on every attention dump under dir (`roundscope report --json`): writes
    out/report.json and out/report.html and returns the command's summary (report, html, files,
    tasks, cached, seconds). client: a dask.distributed Client to run the tasks on (None: every
    core of this machine)."""
    import json

    arguments = _arguments(dir, out, recipe, k_sink)
    if client is not None:
        tasks = _commands.run([*arguments, "--list-tasks", "--json"])[1]["tasks"]
        cache = os.path.join(os.fsdecode(out), "cache")
        os.makedirs(cache, exist_ok=True)
        # An entry that is there but not a valid result is recomputed by the last local run.
        todo = [t for t in tasks if not os.path.isfile(os.path.join(cache, t["key"] + ".json"))]
        futures = client.map(_run_task, [arguments] * len(todo), [t["key"] for t in todo], [t["file"] for t in todo],
                             key=[f"roundscope-{t['key']}" for t in todo], pure=False)
        for task, future in zip(todo, futures):
            _write_atomically(os.path.join(cache, task["key"] + ".json"), json.dumps(future.result()))
    return _commands.run([*arguments, *_commands.flags(threads=threads), "--json"])[1]
