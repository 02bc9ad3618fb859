"""Fixtures of the Python package's tests: the roundscope executable they compare against
(ROUNDSCOPE_CLI, set by ctest; else build/roundscope) and a runner for it."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden" / "h100"


class Cli:
    def __init__(self, path):
        self.path = path

    def run(self, *args, check=True):
        p = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True, timeout=900)
        if check and p.returncode != 0:
            raise AssertionError(f"roundscope {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
        return p

    def json(self, *args):
        return json.loads(self.run(*args, "--json").stdout)

    def error(self, *args):
        """The one-line message of a run that must fail with exit 2."""
        p = self.run(*args, check=False)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        assert p.stderr.startswith("roundscope: error: ") and p.stderr.count("\n") == 1, p.stderr
        return p.stderr[len("roundscope: error: "):].rstrip("\n")


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("ROUNDSCOPE_CLI", str(ROOT / "build" / "roundscope"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no roundscope executable at {path} (build it, or set ROUNDSCOPE_CLI)")
    return Cli(path)


def same_bits(a, b):
    """Equal bit patterns (NaNs included), shapes and dtypes."""
    import numpy as np
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
