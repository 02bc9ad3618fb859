"""The analysis commands keep docs/cli.md's JSON contract, draw their plots (matplotlib is
installed by tools/setup.sh) and refuse bad input with one line and exit 2."""
import subprocess

import pytest

from files_by_hand import f32_bytes, write_safetensors


def test_pcollapse_runs_both_orders_and_scales(cli):
    runs = cli.json("pcollapse", "--synthetic", "--n", "256")["runs"]
    assert {(r["order"], r["scale"]) for r in runs} == {(order, scale) for order in ("forward", "reverse")
                                                        for scale in (1, 256)}
    keys = {"order", "scale", "underflow_fraction", "predicted_fraction", "delta_c", "mse"}
    assert all(keys <= set(r) for r in runs), runs


def test_pcollapse_defaults_to_the_papers_setup_and_ranks_no_saturating_scale_first(cli):
    j = cli.json("pcollapse", "--synthetic", "--n", "128", "--sweep-scale", "--order", "forward")
    assert j["recipe"] == "fp8-p-cast-only", "float32 Q, K, V: only P is cast, as in arXiv:2606.06521"
    by_scale = {r["scale"]: r for r in j["runs"]}
    assert not by_scale[448]["saturates"] and by_scale[448]["normal_octaves"] > by_scale[256]["normal_octaves"]
    for s in (512, 1024):
        assert by_scale[s]["saturates"] and by_scale[s]["normal_octaves"] == 0, by_scale[s]
        assert by_scale[s]["saturated"] > 0, "every row's P = 1 is clipped"
    e4m3_inputs = cli.json("pcollapse", "--synthetic", "--n", "128", "--set", "input=e4m3")
    assert e4m3_inputs["recipe"].startswith("fp8-p-cast-only"), e4m3_inputs["recipe"]


def test_pcollapse_under_fa3s_fp8_recipe_scales_p_by_its_max_offset(cli):
    """h100-fp8 scales P by the 2^k of its max offset, not by a multiply: S = 1 runs it without
    the offset, S = 256 with its 8; only powers of two are reachable, and another S is refused."""
    j = cli.json("pcollapse", "--synthetic", "--n", "256", "--recipe", "h100-fp8", "--order", "forward")
    by_scale = {r["scale"]: r for r in j["runs"]}
    assert set(by_scale) == {1, 256}
    assert by_scale[256]["underflow_fraction"] < by_scale[1]["underflow_fraction"] / 2, by_scale
    sweep = cli.json("pcollapse", "--synthetic", "--n", "128", "--recipe", "h100-fp8", "--order", "forward",
                     "--sweep-scale")
    assert [r["scale"] for r in sweep["runs"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    message = cli.error("pcollapse", "--synthetic", "--n", "128", "--recipe", "h100-fp8", "--scale", "448")
    assert "--scale" in message and "max_offset" in message and "448" in message, message


def test_leak_leaks_without_the_fix_and_not_with_it(cli):
    j = cli.json("leak", "--synthetic", "--n", "64")
    assert {"leaking_pairs", "max_future_influence", "parallel_vs_autoregressive_max_abs_diff"} <= set(j)
    assert j["leaking_pairs"] > 0, "MXFP4 V leaks without the fix"
    fixed = cli.json("leak", "--synthetic", "--n", "64", "--fix")
    assert fixed["leaking_pairs"] == 0 and fixed["parallel_vs_autoregressive_max_abs_diff"] == 0


def test_leak_natural_token_changes(cli):
    j = cli.json("leak", "--synthetic", "--n", "64", "--natural")
    assert j["future_pairs"] == 2 * 496 and j["leaking_pairs"] == j["future_pairs"]
    assert 0 < j["leaking_pairs_natural"] < j["future_pairs"] and j["max_future_influence_natural"] > 0
    assert cli.json("leak", "--synthetic", "--n", "64")["leaking_pairs_natural"] is None


def test_quantizing_q_k_and_p_leaks_nothing(cli):
    """MX blocks of Q and K run along D and P's along keys, within a token or a row: a later
    token never reaches an earlier output (V unquantized: --format none)."""
    j = cli.json("leak", "--synthetic", "--n", "96", "--format", "none", "--recipe", "fa2-bf16", "--set",
                 "qk_quant=mxfp4", "--set", "p_quant=mxfp4", "--natural")
    assert j["format"] == "none" and j["future_pairs"] == 3 * 496
    assert j["leaking_pairs"] == j["leaking_pairs_natural"] == 0 and j["parallel_vs_autoregressive_max_abs_diff"] == 0
    v = cli.json("leak", "--synthetic", "--n", "96", "--recipe", "fa2-bf16", "--set", "p_quant=mxfp4", "--natural")
    assert v["leaking_pairs_natural"] > 0, "V quantized along tokens still leaks"


def test_bias_keys_and_steps(cli):
    j = cli.json("bias", "--synthetic", "--n", "128")
    assert {"rows", "coefficient_sum", "positive_rows", "p_bar_one_count", "top_dims"} <= set(j)
    assert all({"dim", "contribution"} <= set(d) for d in j["top_dims"])
    j = cli.json("bias", "--synthetic", "--n", "64", "--steps", "3", "--fix")
    assert len(j["cumulative_coefficient"]) == 3 and "fixes" in j


def test_bias_with_one_dominant_key_has_no_tie(cli):
    one = cli.json("bias", "--synthetic", "--n", "256", "--tie-gap", "14", "--tied-keys", "1")
    pair = cli.json("bias", "--synthetic", "--n", "256", "--tie-gap", "14")
    assert (one["tied_keys"], pair["tied_keys"], one["tie_gap"]) == (1, 2, 14)
    assert one["tied_rows"] == 0 and one["one_key_rows"] > 200, one
    assert pair["tie_dominated_rows"] > 200 and pair["one_key_rows"] == 0, pair
    assert "--tied-keys" in cli.error("bias", "--synthetic", "--n", "8", "--tied-keys", "8")


def test_bias_with_the_layer_input_gives_the_query_weight_error(cli):
    j = cli.json("bias", "--synthetic", "--n", "64", "--d", "16", "--d-model", "32", "--steps", "3")
    qw = j["query_weight"]
    assert {"rank1_cosine_similarity", "dwq_error_norm", "dwq_norm", "dwq_error_relative", "wq_norm",
            "heads"} <= set(qw)
    assert all(h["q_projection_residual"] < 1e-6 for h in qw["heads"]), "a head's q is x W^Q"
    assert len(j["cumulative_dwq_error_norm"]) == 3, "|dW^Q error| summed over 3 steps"
    assert abs(j["cumulative_dwq_error_norm"][0] / qw["dwq_error_norm"] - 1) < 1e-12
    assert abs(j["structure_cosine_with_first_step"][0] - 1) < 1e-12, "the first step's structure against itself"
    assert 0 < j["dwq_error_coherence"] <= 1 + 1e-12


def test_headroom_covers_three_formats_and_every_row(cli):
    j = cli.json("headroom", "--synthetic", "--n", "64")
    assert {f["format"] for f in j["formats"]} == {"f32", "f16", "bf16"} and len(j["rows"]) == 64


def test_attribute_finds_the_p_cast_in_fp8(cli):
    j = cli.json("attribute", "--synthetic", "--n", "96", "--recipe", "fa3-fp8")
    assert [s["stage"] for s in j["stages"]] == ["score product", "P cast", "P V product", "O cast"]
    assert j["stages"][1]["only_this_low"] > 0.9 * j["all_low"], "the P cast dominates FP8"


@pytest.mark.parametrize("command", [
    ("bias", "--synthetic", "--n", "64", "--steps", "2", "--fix"), ("pcollapse", "--synthetic", "--n", "128"),
    ("leak", "--synthetic", "--n", "64"), ("headroom", "--synthetic", "--n", "64"),
    ("attribute", "--synthetic", "--n", "64", "--recipe", "fa2-bf16"),
], ids=lambda c: c[0])
def test_every_analysis_draws_its_plot(cli, tmp_path, command):
    png = tmp_path / f"{command[0]}.png"
    cli.run(*command, "--plot", png)
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_a_plot_into_a_missing_folder(cli, tmp_path):
    m = cli.error("headroom", "--synthetic", "--n", "16", "--plot", tmp_path / "no" / "such" / "folder.png")
    assert "--plot" in m and "folder.png" in m, m


RAMP = [((i * 37) % 17 - 8) / 8 for i in range(32)]


def f32_file(path, tensors):
    write_safetensors(path, {name: ("F32", shape, f32_bytes(values)) for name, (shape, values) in tensors.items()})
    return path


@pytest.mark.parametrize("command", [("pcollapse",), ("leak",), ("headroom",), ("attribute", "--recipe", "fa2-bf16"),
                                     ("bias",)], ids=lambda c: c[0])
def test_a_nan_filled_q_is_named(cli, tmp_path, command):
    nan_q = f32_file(tmp_path / "nan_q.safetensors", {"q": ([8, 4], [float("nan")] * 32), "k": ([8, 4], RAMP),
                                                      "v": ([8, 4], RAMP), "do": ([8, 4], RAMP)})
    m = cli.error(command[0], nan_q, *command[1:])
    assert all(s in m for s in ("nan_q.safetensors", "'q'", "NaN")), m


def test_a_nan_filled_x_is_named(cli, tmp_path):
    nan_x = f32_file(tmp_path / "nan_x.safetensors", {"q": ([8, 4], RAMP), "k": ([8, 4], RAMP), "v": ([8, 4], RAMP),
                                                      "do": ([8, 4], RAMP), "x": ([8, 6], [float("nan")] * 48)})
    m = cli.error("bias", nan_x)
    assert all(s in m for s in ("nan_x.safetensors", "'x'", "NaN")), m


@pytest.mark.parametrize("args, phrase", [
    (("pcollapse", "--synthetic", "--order", "sideways"), "--order"),
    (("leak", "--synthetic", "--format", "mxfp9"), "mxfp9"),
    (("bias", "--synthetic", "--recipe", "fa9"), "fa9"),
    (("headroom", "--synthetic", "--scenario", "calm"), "calm"),
    (("pcollapse",), "input file or --synthetic"),
    (("attribute", "--synthetic", "--recipe", "fa2-bf16", "--set", "score_product=exactly"), "score_product"),
    (("bias", "missing.safetensors"), "missing.safetensors"),
    (("bias", "--synthetic", "--d-model", "1"), "--d-model"),
])
def test_bad_input_gets_one_line(cli, tmp_path, args, phrase):
    assert phrase in cli.error(*args, cwd=tmp_path)


def test_plot_runs_from_the_package_wherever_the_executable_is(cli, tmp_path):
    """--plot runs `python -m roundscope.plot` with a Python found from where roundscope runs (no
    path from the build is kept): an executable moved elsewhere with its package beside it draws
    with the active virtual environment's Python, or with ROUNDSCOPE_PYTHON's; a Python that
    cannot draw is named before any work."""
    import os
    import shutil
    import sys
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(cli.path, moved / "roundscope")
    shutil.copytree(os.path.join(os.path.dirname(cli.path), "python", "roundscope"), moved / "python" / "roundscope",
                    symlinks=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ROUNDSCOPE_PYTHON")}
    for extra in ({"VIRTUAL_ENV": str(os.path.dirname(os.path.dirname(sys.executable)))},
                  {"ROUNDSCOPE_PYTHON": sys.executable}):
        png = tmp_path / f"{sorted(extra)[0]}.png"
        p = subprocess.run([moved / "roundscope", "headroom", "--synthetic", "--n", "32", "--plot", png],
                           capture_output=True, text=True, env={**env, **extra}, cwd=tmp_path, timeout=300)
        assert p.returncode == 0, p.stderr
        assert png.read_bytes()[:4] == b"\x89PNG"
    p = subprocess.run([moved / "roundscope", "headroom", "--synthetic", "--n", "32", "--plot", tmp_path / "x.png"],
                       capture_output=True, text=True, env={**env, "ROUNDSCOPE_PYTHON": str(tmp_path / "no-python")},
                       timeout=300)
    assert p.returncode == 2 and p.stdout == "" and not (tmp_path / "x.png").exists()
    assert p.stderr.startswith("roundscope: error: --plot: no Python with the roundscope package and matplotlib"), \
        p.stderr


def test_a_plot_is_drawn_in_the_format_its_name_asks_for(cli, tmp_path):
    """--plot p.pdf is a PDF and p.svg an SVG; a name of another format is refused before any work."""
    for name, magic in (("p.png", b"\x89PNG"), ("p.pdf", b"%PDF"), ("p.SVG", b"<?xml")):
        cli.run("headroom", "--synthetic", "--n", "16", "--plot", tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(magic), name
    for name in ("p.jpg", "p.txt", "p"):
        m = cli.error("headroom", "--synthetic", "--n", "16", "--plot", tmp_path / name)
        assert "--plot" in m and ".png, .pdf or .svg" in m, m
        assert not (tmp_path / name).exists()
