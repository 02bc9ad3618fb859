"""mx.quantize / dequantize / compare_rules and mma: the same bits and JSON as `roundscope mx`
and `roundscope mma` on the same inputs."""
import numpy as np
import pytest

import roundscope as rs
from cli_messages import python_message
from conftest import GOLDEN
from files_by_hand import same_bits

BLOCK_FORMATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8", "nvfp4"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 70, 24)) * np.exp2(rng.integers(-20, 20, (3, 70, 1)))).astype(np.float32)
    x[0, 3, 5] = 0.0
    x[1, :32, 0] = 0.0  # an all-zero block along tokens
    path = tmp_path_factory.mktemp("mx") / "x.safetensors"
    rs.write(path, {"x": x})
    return x, path


# Every MX format under every scale rule; NVFP4 (one scale rule of its own, blocks of 16) once.
CASES = [(f, r) for f in BLOCK_FORMATS if f != "nvfp4" for r in ["floor", "ceil", "even", "rceil"]]
CASES += [("nvfp4", "floor")]


@pytest.mark.parametrize("fmt,rule", CASES)
@pytest.mark.parametrize("axis,block,offset,mode", [(-1, None, 0, None), (-2, 16, 5, "sr"), (-2, 16, 0, "rtz")])
def test_quantize_and_dequantize_equal_cli(cli, source, tmp_path, fmt, rule, axis, block, offset, mode):
    x, path = source
    flags = ["--axis", axis, "--offset", offset, "--scale-rule", rule, "--seed", 7]
    flags += ["--block", block] if block else []
    flags += ["--round", mode] if mode else []
    cli.run("mx", path, "--format", fmt, *flags, "--dequant", "-o", tmp_path / "q.safetensors")
    want = rs.read(tmp_path / "q.safetensors")
    q = rs.mx.quantize(x, fmt, block=block, axis=axis, offset=offset, scale_rule=rule, rounding=mode, seed=7)
    assert same_bits(q.elements, want["x.elements"])
    assert same_bits(q.scales, want["x.scales"])
    if fmt == "nvfp4":
        assert np.float32(q.per_tensor_scale) == want["x.per_tensor_scale"]
    else:
        assert q.per_tensor_scale is None and "x.per_tensor_scale" not in want
    assert same_bits(rs.mx.dequantize(q), want["x"])


def test_single_level_nvfp4_and_compare_rules_equal_cli(cli, source, tmp_path):
    x, path = source
    cli.run("mx", path, "--format", "nvfp4", "--single-level", "-o", tmp_path / "q.safetensors")
    q = rs.mx.quantize(x, "nvfp4", single_level=True)
    assert q.per_tensor_scale is None
    assert same_bits(q.elements, rs.read(tmp_path / "q.safetensors")["x.elements"])
    assert rs.mx.compare_rules(x, "mxfp8_e4m3", axis=-2) == cli.json("mx", path, "--format", "mxfp8_e4m3", "--axis",
                                                                     -2, "--compare-rules")


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
@pytest.mark.parametrize("shape,axis", [((4, 0), -1), ((4, 0), -2), ((0, 32), -1), ((0, 32), -2)])
def test_an_empty_tensor_has_no_blocks_along_any_axis(cli, tmp_path, fmt, shape, axis):
    """docs/cli.md, mx: a tensor of no elements quantizes to elements and scales of no elements,
    the empty axis kept (the number of blocks along it is ceil(0 / K) = 0), here as on the command line."""
    x = np.zeros(shape, np.float32)
    rs.write(tmp_path / "x.safetensors", {"x": x})
    report = cli.json("mx", tmp_path / "x.safetensors", "--format", fmt, "--axis", axis, "--dequant", "-o",
                      tmp_path / "q.safetensors")
    assert report["tensors"] == [{"blocks": 0, "name": "x", "nan_blocks": 0, "shape": list(shape)}]
    want = rs.read(tmp_path / "q.safetensors")
    q = rs.mx.quantize(x, fmt, axis=axis)
    for got, name in ((q.elements, "x.elements"), (q.scales, "x.scales"), (rs.mx.dequantize(q), "x")):
        assert got.size == 0 and 0 in got.shape and got.ndim == 2 and got.shape == want[name].shape, name


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("mma_*.safetensors")), ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", ["sm80", "sm89", "sm90", "sm100"])
def test_mma_equals_cli(cli, tmp_path, golden, arch):
    tiles = rs.read(golden)
    # The command line reads the capture's instruction (mma.sync here) and runs it on --arch, a
    # what-if; arrays carry no instruction, so it is given.
    captured = rs.read_metadata(golden)["instruction"]
    instruction = "mma.sync" if captured.startswith("mma.sync") else captured.split(".")[0]
    args = [golden, "--arch", arch, "-o", tmp_path / "d.safetensors"]
    p = cli.run("mma", *args, check=False)
    if p.returncode == 2:  # no model of these inputs on this architecture: the same error
        with pytest.raises(ValueError) as e:
            rs.mma(tiles["A"], tiles["B"], tiles["C"], arch=arch, instruction=instruction)
        said = p.stderr.removeprefix("roundscope: error: ").rstrip()
        assert str(e.value) == python_message(said.replace(str(golden), "<arrays>"))
        return
    assert p.returncode == 0, p.stderr
    got = rs.mma(tiles["A"], tiles["B"], tiles["C"], arch=arch, instruction=instruction)
    assert same_bits(got, rs.read(tmp_path / "d.safetensors")["D"])
    if arch == "sm90":  # the hardware's own D
        assert same_bits(got, tiles["D"])
