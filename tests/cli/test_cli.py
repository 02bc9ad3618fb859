"""The command-line contract of docs/cli.md for `formats` and `cast`: JSON keys, exact values,
one-line errors with exit code 2."""
import json
import math

import pytest


def test_formats_json_has_every_key_and_the_published_limits(cli):
    formats = cli.json("formats")["formats"]
    keys = {"name", "bits", "exp_bits", "man_bits", "bias", "max", "min_normal", "min_subnormal", "has_inf", "nan"}
    assert all(keys <= set(f) for f in formats), formats[0]
    by_name = {f["name"]: f for f in formats}
    assert set(by_name) >= {"f64", "f32", "f16", "bf16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0", "ue4m3",
                            "int8"}
    expected_max = {"e4m3": 448, "e5m2": 57344, "e2m3": 7.5, "e3m2": 28, "e2m1": 6, "f16": 65504, "int8": 127 / 64}
    assert {n: by_name[n]["max"] for n in expected_max} == expected_max
    assert by_name["e4m3"]["min_subnormal"] == 2**-9
    assert by_name["e8m0"]["min_normal"] == 2**-127
    assert by_name["e5m2"]["has_inf"] and not by_name["e4m3"]["has_inf"]


def test_cast_json_gives_bits_values_and_errors(cli):
    results = cli.json("cast", "0.1", "448", "465", "nan", "--to", "e4m3")["results"]
    assert all({"input", "bits", "value", "abs_error", "rel_error"} <= set(r) for r in results), results
    assert results[0]["bits"] == "0x1d" and results[0]["value"] == 0.1015625, results[0]
    assert math.isclose(results[0]["abs_error"], 0.0015625, rel_tol=1e-12), results[0]
    assert results[2]["bits"] == "0x7e" and results[2]["value"] == 448, "465 saturates (cuda convention)"
    assert results[3]["bits"] == "0x7f" and results[3]["value"] == "nan", results[3]


@pytest.mark.parametrize("args, field, want", [
    (("465", "--to", "e4m3", "--nosat"), "bits", "0x7f"),                   # overflow without saturation: NaN
    (("0x1.8p-3", "--to", "bf16", "--round", "rtz"), "value", 0.1875),     # hex-float input
    (("0x7e", "--from", "e4m3", "--to", "f32"), "bits", "0x43e00000"),      # raw bits input
    (("--to", "e5m2", "--nosat", "--", "-inf"), "value", "-inf"),           # a negative value after --
    # decimal input is rounded once: 1 + 2^-24 + 10^-30 (just above a float32 tie) rounds up
    (("1.00000005960464477539062500000000000001", "--to", "f32"), "bits", "0x3f800001"),
])
def test_cast_reads_every_kind_of_value(cli, args, field, want):
    assert json.loads(cli.run("cast", "--json", *args).stdout)["results"][0][field] == want


def test_stochastic_rounding_with_n_bits(cli):
    assert cli.json("cast", "1", "2", "3", "--to", "e2m1", "--round", "sr:4", "--seed", "9")["round"] == "sr:4"


@pytest.mark.parametrize("args, culprit", [
    (("cast", "1", "--to", "e4m4"), "e4m4"),
    (("cast", "1", "--to", "e4m3", "--round", "nearest"), "nearest"),
    (("cast", "1", "--to", "e4m3", "--round", "sr:24"), "sr:24"),
    (("cast", "1", "--to", "e4m3", "--round", "sr:0"), "sr:0"),
    (("cast", "abc", "--to", "e4m3"), "abc"),
    (("cast", "0x1ff", "--from", "e4m3", "--to", "f32"), "0x1ff"),
    (("cast", "1", "--to", "e4m3", "--convention", "numpy"), "numpy"),
    (("cast", "1", "--to", "e4m3", "--sat", "--nosat"), "nosat"),
    (("cast", "1"), "--to"),
    (("frobnicate",), "frobnicate"),
])
def test_bad_input_is_one_line_naming_the_culprit(cli, args, culprit):
    assert culprit in cli.error(*args)


@pytest.mark.parametrize("args, flag", [
    (("cast", "1", "--to", "e4m4"), "--to"),
    (("cast", "1", "--to", "e4m3", "--round", "nearest"), "--round"),
    (("cast", "1", "--to", "e4m3", "--convention", "numpy"), "--convention"),
    (("cast", "0x1", "--from", "e9m9", "--to", "f32"), "--from"),
])
def test_a_bad_value_is_named_by_its_flag(cli, args, flag):
    assert cli.error(*args).startswith(flag + ": ")


def test_the_executable_needs_no_cuda_runtime_library(cli):
    """The CUDA runtime is linked statically where the kernels are built: roundscope starts on a
    machine without libcudart (a CPU-only one), and loads the driver only for a GPU command."""
    import subprocess
    needed = subprocess.run(["readelf", "-d", cli.path], capture_output=True, text=True, check=True).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
    assert libraries and not any("cudart" in name or name.startswith("libcuda.") for name in libraries), libraries


def test_inspect_prints_no_terminal_escape_from_a_file(cli, tmp_path):
    """Tensor names and metadata are the file's: printed with control characters (an escape
    sequence's start, C1 controls) escaped, UTF-8 text as it is; --json keeps them exact."""
    import numpy as np

    import roundscope as rs
    path = tmp_path / "escapes.safetensors"
    rs.write(path, {"\x1b[2Jq": np.zeros(4, np.float32), "café": np.ones(2, np.float32)},
             {"note\x1b]0;title\x07": "value\x9b31m \u0085 ünïcode"})
    out = cli.run("inspect", path).stdout
    assert "\x1b" not in out and "\x07" not in out and "\u0085" not in out and "\x9b" not in out, repr(out)
    assert "\\x1b[2Jq" in out and "café" in out and "ünïcode" in out and "\\xc2\\x85" in out, out
    j = cli.json("inspect", path)
    assert j["metadata"] == {"note\x1b]0;title\x07": "value\x9b31m \u0085 ünïcode"}
