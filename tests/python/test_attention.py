"""attention, truth and the analyses: the same bits and the same dicts as `roundscope attention`,
`truth`, `pcollapse`, `leak`, `headroom`, `bias` and `attribute --json` on the same inputs."""
import numpy as np
import pytest

import roundscope as rs
from cli_messages import python_message
from files_by_hand import same_bits

RECIPES = rs.recipes()["recipes"]


def heads(rng, b, h, n, d, sink=False):
    x = {name: rng.standard_normal((b, h, n, d)).astype(np.float32) for name in ("q", "k", "v", "do")}
    if sink:  # the first key stands out: P-collapse and headroom have something to find
        x["k"][..., 0, :] = 4 * x["q"].mean(axis=-2)
    return x


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    x = heads(np.random.default_rng(6), 1, 2, 80, 32, sink=True)
    path = tmp_path_factory.mktemp("attention") / "x.safetensors"
    rs.write(path, x)
    return x, path


@pytest.mark.parametrize("recipe", [r["name"] for r in RECIPES])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_equals_cli(cli, inputs, tmp_path, recipe, causal):
    x, path = inputs
    mask = ["--causal"] if causal else ["--no-causal"]
    out = tmp_path / "o.safetensors"
    p = cli.run("attention", path, "--recipe", recipe, "--backward", *mask, "-o", out, check=False)
    backward = p.returncode == 0
    if not backward:  # a recipe without a backward pass (the non-fused softmax): the same error
        with pytest.raises(ValueError) as e:
            rs.attention(x["q"], x["k"], x["v"], recipe=recipe, causal=causal, backward=True, do=x["do"])
        said = p.stderr.removeprefix("roundscope: error: ").rstrip()
        assert str(e.value) == python_message(said.replace(str(path), "<arrays>"))
        cli.run("attention", path, "--recipe", recipe, *mask, "-o", out)
    want = rs.read(out)
    got = rs.attention(x["q"], x["k"], x["v"], recipe=recipe, causal=causal, backward=backward, do=x["do"])
    assert sorted(got) == sorted(want)
    for name in want:
        assert same_bits(got[name], want[name]), name


def test_settings_scale_and_truth_errors_equal_cli(cli, inputs, tmp_path):
    x, path = inputs
    out = cli.json("attention", path, "--recipe", "fa3-fp8", "--set", "p_scale=256", "--set", "kv_order=reverse",
                   "--softmax-scale", 0.2, "--truth", "-o", tmp_path / "o.safetensors")
    got = rs.attention(x["q"], x["k"], x["v"], recipe="fa3-fp8", settings={"p_scale": 256, "kv_order": "reverse"},
                       softmax_scale=0.2, truth=True)
    assert got["errors"] == out["errors"]
    assert same_bits(got["o"], rs.read(tmp_path / "o.safetensors")["o"])


@pytest.mark.parametrize("causal", [False, True])
def test_truth_equals_cli(cli, inputs, tmp_path, causal):
    x, path = inputs
    mask = ["--causal"] if causal else ["--no-causal"]
    cli.run("truth", path, "--backward", "--intermediates", *mask, "-o", tmp_path / "t.safetensors")
    want = rs.read(tmp_path / "t.safetensors")
    got = rs.truth(x["q"], x["k"], x["v"], do=x["do"], causal=causal, backward=True, intermediates=True)
    assert sorted(got) == sorted(want)
    for name in want:
        assert same_bits(got[name], want[name]), name


def test_truth_with_a_bias_equals_cli(cli, inputs, tmp_path):
    x, _ = inputs
    bias = np.where(np.random.default_rng(7).random((80, 80)) < 0.1, -np.inf, 0.5).astype(np.float32)
    rs.write(tmp_path / "x.safetensors", {**x, "bias": bias})
    cli.run("truth", tmp_path / "x.safetensors", "-o", tmp_path / "t.safetensors")
    got = rs.truth(x["q"], x["k"], x["v"], bias=bias)
    assert same_bits(got["o"], rs.read(tmp_path / "t.safetensors")["o"])


def analyses(path):
    """(Python call, the same command line) for every analysis and its main options."""
    return [
        (lambda i: rs.pcollapse(i, k_sink=1, scale=[1.0, 256.0], order="both"),
         ["pcollapse", path, "--k-sink", 1, "--scale", 1, "--scale", 256, "--order", "both"]),
        (lambda i: rs.pcollapse(i, sweep_scale=True, recipe="fa3-fp8", settings={"p_scale": 1}, causal=True),
         ["pcollapse", path, "--sweep-scale", "--recipe", "fa3-fp8", "--set", "p_scale=1", "--causal"]),
        (lambda i: rs.leak(i, format="mxfp4", block=16, max_tokens=24),
         ["leak", path, "--format", "mxfp4", "--block", 16, "--max-tokens", 24]),
        (lambda i: rs.leak(i, fix=True, recipe="mxfp4-v-fixed", max_tokens=16),
         ["leak", path, "--fix", "--recipe", "mxfp4-v-fixed", "--max-tokens", 16]),
        (lambda i: rs.headroom(i), ["headroom", path]),
        (lambda i: rs.bias(i, fix=True, recipe="fa2-bf16-torch"),
         ["bias", path, "--fix", "--recipe", "fa2-bf16-torch"]),
        (lambda i: rs.attribute(i, recipe="fa3-fp8", softmax_scale=0.25),
         ["attribute", path, "--recipe", "fa3-fp8", "--softmax-scale", 0.25]),
    ]


@pytest.mark.parametrize("case", range(7))
def test_analyses_on_arrays_and_files_equal_cli(cli, inputs, case):
    x, path = inputs
    call, args = analyses(path)[case]
    want = cli.json(*args)
    assert call(path) == want
    assert call({n: x[n] for n in ("q", "k", "v", "do")}) == replace_file(want, str(path), "<arrays>")


def replace_file(result, path, name):
    if isinstance(result, dict):
        return {k: replace_file(v, path, name) for k, v in result.items()}
    if isinstance(result, list):
        return [replace_file(v, path, name) for v in result]
    return name if result == path else result


@pytest.mark.parametrize("command,call", [
    (["pcollapse", "--synthetic", "--n", 512, "--sink-strength", 6, "--seed", 3],
     lambda: rs.pcollapse(n=512, sink_strength=6.0, seed=3)),
    (["leak", "--synthetic", "--n", 64, "--d", 16], lambda: rs.leak(synthetic=True, n=64, d=16)),
    (["headroom", "--synthetic", "--scenario", "sink"], lambda: rs.headroom(scenario="sink")),
    (["bias", "--synthetic", "--steps", 3, "--heads", 1, "--n", 128, "--d-model", 64],
     lambda: rs.bias(steps=3, heads=1, n=128, d_model=64)),
    (["attribute", "--synthetic", "--recipe", "mxfp4-v", "--scenario", "wide", "--n", 64, "--d", 16],
     lambda: rs.attribute(recipe="mxfp4-v", scenario="wide", n=64, d=16)),
])
def test_synthetic_analyses_equal_cli(cli, command, call):
    assert call() == cli.json(*command)


def test_bias_over_several_steps_of_arrays_equals_cli(cli, tmp_path):
    rng = np.random.default_rng(8)
    steps = [heads(rng, 1, 1, 64, 32) for _ in range(3)]
    paths = []
    for i, s in enumerate(steps):
        paths.append(tmp_path / f"step{i}.safetensors")
        rs.write(paths[-1], s)
    want = cli.json("bias", *paths, "--fix")
    assert rs.bias(paths, fix=True) == want
    got = rs.bias(steps, fix=True)
    for i, p in enumerate(paths):
        want = replace_file(want, str(p), f"<arrays {i + 1}>")
    assert got == want
