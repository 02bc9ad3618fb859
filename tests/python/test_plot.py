"""roundscope.plot draws each analysis's result (what the functions return, what --json prints)
into a PNG, the same module `--plot` runs; bad arguments are exceptions naming them, and the
module run as `--plot` runs it refuses them in one line, exit 2."""
import json
import os
import subprocess
import sys

import pytest

import roundscope as rs
import roundscope.plot

RESULTS = {
    "bias": lambda: rs.bias(synthetic=True, n=64, d=16, steps=2, fix=True),
    "pcollapse": lambda: rs.pcollapse(synthetic=True, n=128, d=16),
    "leak": lambda: rs.leak(synthetic=True, n=64, d=16),
    "headroom": lambda: rs.headroom(synthetic=True, n=64, d=16),
    "attribute": lambda: rs.attribute(synthetic=True, n=64, d=16, recipe="fa2-bf16"),
}


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_each_analysis_is_drawn_as_the_command_line_draws_it(cli, tmp_path, kind):
    path = tmp_path / f"{kind}.png"
    roundscope.plot.plot(kind, RESULTS[kind](), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


def test_bad_arguments_name_themselves(tmp_path):
    result = RESULTS["headroom"]()
    with pytest.raises(ValueError, match=r"^kind: 'headrom' is not one of "):
        roundscope.plot.plot("headrom", result, tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"^result: not a pcollapse result"):
        roundscope.plot.plot("pcollapse", result, tmp_path / "x.png")
    with pytest.raises(TypeError, match=r"^result: expected"):
        roundscope.plot.plot("headroom", [1, 2], tmp_path / "x.png")
    with pytest.raises(FileNotFoundError, match=r"^path: no folder"):
        roundscope.plot.plot("headroom", result, tmp_path / "no" / "x.png")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, stdin, phrase", [
    (["headroom", "x.png"], "{", "standard input: not a report's JSON"),
    (["headroom", "x.png"], "[" * 100000, "standard input: not a report's JSON"),
    (["headroom", "x.png"], "[1, 2]", "result: expected"),
    (["pcollapse", "x.png"], "{}", "result: not a pcollapse result"),
    (["headroom", "no/x.png"], None, "path: no folder"),
    (["headrom", "x.png"], "{}", "usage:"),
    ([], "{}", "usage:"),
])
def test_the_module_as_plot_runs_it_refuses_in_one_line(tmp_path, args, stdin, phrase):
    if stdin is None:
        stdin = json.dumps(RESULTS["headroom"]())
    p = subprocess.run([sys.executable, "-m", "roundscope.plot", *args], input=stdin, capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("roundscope.plot: "), p.stderr
    assert phrase in p.stderr, p.stderr
    assert list(tmp_path.iterdir()) == []
