"""launch_heads (--launch-heads): one head of a bigger launch, measured alone, keeps the kernel
PyTorch would run on the whole grid. torch-flash-sm90 splits KV for a grid of one head at N 1000,
D 128 (8 splits) and not for 300 heads: a head given with launch_heads=300 is the unsplit kernel,
bit for bit; a launch smaller than the inputs' own heads is refused before any work."""
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import roundscope as rs

N, D = 1000, 128


@pytest.fixture(scope="module")
def one_head():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((1, N, D)).astype(np.float32) for _ in range(4)]


def bits(x):
    return np.asarray(x).view(np.uint16 if np.asarray(x).dtype.itemsize == 2 else np.uint32)


def test_a_head_of_a_big_launch_runs_the_kernel_of_the_whole_grid(one_head):
    q, k, v, _ = one_head
    alone = rs.attention(q, k, v, recipe="torch-flash-sm90", threads=1)
    launched = rs.attention(q, k, v, recipe="torch-flash-sm90", launch_heads=300, threads=1)
    unsplit = rs.attention(q, k, v, recipe="torch-flash-sm90", settings={"split_kv_sms": 0}, threads=1)
    for name in ("o", "lse"):
        assert np.array_equal(bits(launched[name]), bits(unsplit[name])), name
    # the split kernel (a grid of one) parts from it: the control that launch_heads took effect
    assert not np.array_equal(bits(alone["lse"]), bits(unsplit["lse"]))
    # a launch of the inputs' own size is the default
    own = rs.attention(q, k, v, recipe="torch-flash-sm90", launch_heads=1, threads=1)
    assert np.array_equal(bits(own["o"]), bits(alone["o"]))


def test_the_analyses_take_it(one_head):
    q, k, v, do = one_head
    inputs = {"q": q, "k": k, "v": v, "do": do}
    launched = rs.bias(inputs, recipe="torch-flash-sm90", launch_heads=300, threads=1)
    unsplit = rs.bias(inputs, recipe="torch-flash-sm90", settings={"split_kv_sms": 0}, threads=1)
    alone = rs.bias(inputs, recipe="torch-flash-sm90", threads=1)
    assert launched["coefficient_sum"] == unsplit["coefficient_sum"] != alone["coefficient_sum"]
    runs = [rs.pcollapse({"q": q, "k": k, "v": v}, recipe="torch-flash-sm90", k_sink=1, scale=[1], **kw)["runs"]
            for kw in ({"launch_heads": 300}, {"settings": {"split_kv_sms": 0}})]
    assert [r["mse"] for r in runs[0]] == [r["mse"] for r in runs[1]]


@pytest.mark.parametrize("value, phrase", [
    (0, "launch_heads: must be an integer from 1 to 2147483648, not '0'"),
    (2 ** 31 + 1, "launch_heads: must be an integer from 1 to 2147483648"),
    (1, "launch_heads: 1 is fewer than the inputs' own 2 (batch x heads)"),
])
def test_a_launch_that_cannot_be_is_refused(value, phrase):
    x = np.ones((2, 8, 16), np.float32)
    with pytest.raises(ValueError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        rs.attention(x, x, x, recipe="torch-flash-sm90", launch_heads=value)
    with pytest.raises(ValueError, match="launch_heads"):
        rs.bias({"q": x, "k": x, "v": x, "do": x}, launch_heads=value)


def test_the_command_line_takes_it(cli, tmp_path, one_head):
    q, k, v, _ = one_head
    save_file({"q": q, "k": k, "v": v}, str(tmp_path / "in.safetensors"))
    outs = {}
    for name, flags in (("launched", ["--launch-heads", "300"]), ("unsplit", ["--set", "split_kv_sms=0"])):
        cli.run("attention", tmp_path / "in.safetensors", "--recipe", "torch-flash-sm90", *flags,
                "-o", tmp_path / f"{name}.safetensors")
        outs[name] = load_file(str(tmp_path / f"{name}.safetensors"))
    assert all(np.array_equal(bits(outs["launched"][t]), bits(outs["unsplit"][t])) for t in ("o", "lse"))
    two = tmp_path / "two.safetensors"
    save_file({"q": np.ones((2, 8, 16), np.float32), "k": np.ones((2, 8, 16), np.float32),
               "v": np.ones((2, 8, 16), np.float32)}, str(two))
    m = cli.error("attention", two, "--recipe", "torch-flash-sm90", "--launch-heads", "1", "-o", tmp_path / "x.st")
    assert m == "--launch-heads: 1 is fewer than the inputs' own 2 (batch x heads)", m
    assert not (tmp_path / "x.st").exists()
    m = cli.error("pcollapse", two, "--launch-heads", "0")
    assert "--launch-heads" in m, m
