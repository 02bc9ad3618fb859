"""The package's functions are library calls: they read their keyword arguments into the
library's typed requests (api/) with no command line in between, refuse an argument the call
cannot use, and give the same result as the command line."""
import numpy as np
import pytest

import roundscope as rs
from roundscope import _core

RNG = np.random.default_rng(3)
QKV = {n: RNG.standard_normal((32, 16)).astype(np.float32) for n in ("q", "k", "v", "do")}

CALLS = {
    "pcollapse": lambda x: rs.pcollapse(x, k_sink=2),
    "leak": lambda x: rs.leak(x, max_tokens=32),
    "headroom": lambda x: rs.headroom(x),
    "bias": lambda x: rs.bias(x),
    "attribute": lambda x: rs.attribute(x, recipe="fa2-bf16"),
}


def test_there_is_no_command_line_to_build():
    """The core runs no command line for the package's functions: its one entry to the command
    line is `main` (the console script), and no module of the package builds one."""
    assert not hasattr(_core, "run")
    import pathlib
    package = pathlib.Path(rs.__file__).resolve().parent
    for source in package.glob("*.py"):
        text = source.read_text()
        assert "_core.main(" not in text or source.name == "__main__.py", source
        assert "_commands" not in text, source


@pytest.mark.parametrize("name", CALLS)
def test_the_same_result_as_the_command_line(name, cli, tmp_path):
    path = tmp_path / "x.safetensors"
    rs.write(path, QKV)
    flags = {"pcollapse": ["--k-sink", "2"], "leak": ["--max-tokens", "32"], "attribute": ["--recipe", "fa2-bf16"]}
    assert CALLS[name](path) == cli.json(name, path, *flags.get(name, []))


@pytest.mark.parametrize("call, error, start", [
    (lambda p: rs.headroom(p, n=64), ValueError, "n: applies to synthetic inputs only"),
    (lambda p: rs.pcollapse(p, sink_strength=4.0), ValueError, "sink_strength: applies to synthetic inputs only"),
    (lambda p: rs.bias([p, p], steps=3), ValueError, "steps: applies to synthetic inputs only"),
    (lambda p: rs.headroom(p, synthetic=True), ValueError, "synthetic: give inputs or synthetic=True, not both"),
    (lambda p: _core.headroom(None, n=64, nn=3), TypeError, "nn: not an argument of this call"),
    (lambda p: _core.pcollapse(None, scale="256"), TypeError, "scale: expected a number or a sequence of numbers"),
    (lambda p: _core.leak(None, fix=1), TypeError, "fix: expected True or False"),
    (lambda p: _core.headroom(None, seed=2**64), ValueError, "seed: must be an integer from 0 to 18446744073709551615"),
    (lambda p: _core.headroom(None, n=2**70), ValueError, "n: must be an integer from -2^63"),
    (lambda p: _core.headroom(None, softmax_scale=True), TypeError, "softmax_scale: expected a number, not True"),
], ids=["n with a file", "sink_strength with a file", "steps with files", "file and synthetic", "unknown keyword",
        "scale a string", "fix an int", "seed 2^64", "n 2^70", "softmax_scale a bool"])
def test_an_argument_the_call_cannot_use_is_refused_by_name(call, error, start, tmp_path):
    path = tmp_path / "x.safetensors"
    rs.write(path, QKV)
    with pytest.raises(error) as e:
        call(path)
    assert str(e.value).startswith(start), str(e.value)
    assert "--" not in str(e.value)


def test_a_tensor_of_the_callers_is_named_alone_and_a_files_with_its_file(tmp_path):
    bad = dict(QKV, k=QKV["k"].copy())
    bad["k"][3, 1] = np.nan
    with pytest.raises(ValueError, match=r"^k: holds NaN or Inf \(element 49\)"):
        rs.headroom(bad)
    rs.write(tmp_path / "bad.safetensors", bad)
    with pytest.raises(ValueError) as e:
        rs.headroom(tmp_path / "bad.safetensors")
    assert str(e.value).startswith(f"{tmp_path / 'bad.safetensors'}: tensor 'k' holds NaN or Inf"), str(e.value)
