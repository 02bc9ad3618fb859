"""Fixtures of every Python test (pytest, tests/pytest.ini): the roundscope executable under test
(ROUNDSCOPE_CLI, set by ctest; else build/roundscope) with a runner for it, and the paths the
tests read (the repository, its golden files)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden" / "h100"


def run_example(name, *args, timeout=600):
    """The example script `name` (a file of the examples folder) run with this Python and `args`; the
    finished process (output captured)."""
    return subprocess.run([sys.executable, ROOT / "examples" / name, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


class Cli:
    """The executable under test: run a command line, read its JSON, or its one-line error."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, check=True, timeout=900, **kwargs):
        p = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kwargs)
        if check and p.returncode != 0:
            raise AssertionError(f"roundscope {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
        return p

    def json(self, *args, **kwargs):
        return json.loads(self.run(*args, "--json", **kwargs).stdout)

    def error(self, *args, **kwargs):
        """The message of a run that must fail as docs/cli.md says bad input fails: exit 2, nothing
        on standard output, one line `roundscope: error: ...` on standard error."""
        p = self.run(*args, check=False, **kwargs)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        assert p.stderr.startswith("roundscope: error: ") and p.stderr.count("\n") == 1, p.stderr
        assert p.stdout == "", p.stdout
        return p.stderr[len("roundscope: error: "):].rstrip("\n")


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("ROUNDSCOPE_CLI", str(ROOT / "build" / "roundscope"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no roundscope executable at {path} (build it, or set ROUNDSCOPE_CLI)")
    return Cli(path)
