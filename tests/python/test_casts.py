"""cast and decode: the same bits as `roundscope cast IN -o OUT` for every format, rounding mode,
saturation and convention; equal to ml_dtypes where the conventions agree."""
import os
import subprocess

import numpy as np
import ml_dtypes
import pytest

import roundscope as rs
from files_by_hand import same_bits

FORMATS = ["f64", "f32", "f16", "bf16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0", "ue4m3", "int8",
           "e4m3fnuz", "e5m2fnuz"]
MODES = [None, "rna", "rtz", "up", "down", "odd", "sr", "sr:5"]


def special_inputs(rng):
    """Random values over every binade that matters, with the special values and ties."""
    x = np.concatenate([
        rng.standard_normal(3000) * np.exp2(rng.integers(-140, 130, 3000)),
        [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465, 480, 57344, 61440, 6, 7, 0.25, 1.5, 2 ** -9, 2 ** -10],
        np.float32(1) + np.arange(-8, 8) * np.float32(2 ** -8),
    ])
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    x = special_inputs(np.random.default_rng(1))
    path = tmp_path_factory.mktemp("cast") / "x.safetensors"
    rs.write(path, {"x": x})
    return x, path


@pytest.mark.parametrize("to", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_cast_equals_cli(cli, source, tmp_path, to, mode):
    x, path = source
    flags = ["--round", mode] if mode else []
    cli.run("cast", path, "--to", to, *flags, "--seed", 11, "-o", tmp_path / "y.safetensors")
    want = rs.read(tmp_path / "y.safetensors")["x"]
    got = rs.cast(x, to, rounding=mode, seed=11)
    assert same_bits(got, want)


@pytest.mark.parametrize("to", ["bf16", "e4m3", "e5m2", "e2m1", "e4m3fnuz"])
@pytest.mark.parametrize("convention", ["cuda", "ocp", "ml_dtypes", "torch"])
@pytest.mark.parametrize("saturate", [None, True, False])
def test_conventions_and_saturation_equal_cli(cli, source, tmp_path, to, convention, saturate):
    x, path = source
    flags = {None: [], True: ["--sat"], False: ["--nosat"]}[saturate]
    cli.run("cast", path, "--to", to, "--convention", convention, *flags, "--flush-output",
            "-o", tmp_path / "y.safetensors")
    got = rs.cast(x, to, convention=convention, saturate=saturate, flush_output=True)
    assert same_bits(got, rs.read(tmp_path / "y.safetensors")["x"])


def test_scale_flush_input_and_float64_sources_equal_cli(cli, tmp_path):
    x = special_inputs(np.random.default_rng(2)).astype(np.float64) * 1.0000001
    rs.write(tmp_path / "x.safetensors", {"x": x})
    cli.run("cast", tmp_path / "x.safetensors", "--to", "e5m2", "--scale", 0.375, "--flush-input",
            "-o", tmp_path / "y.safetensors")
    got = rs.cast(x, "e5m2", scale=0.375, flush_input=True)
    assert same_bits(got, rs.read(tmp_path / "y.safetensors")["x"])


@pytest.mark.parametrize("to", ["bf16", "e4m3"])
def test_cast_equals_ml_dtypes_on_a_large_sample(to):
    # The whole float32 range in CI's fast set: 2^24 random patterns (every pattern: the
    # exhaustive test below).
    bits = np.random.default_rng(3).integers(0, 2 ** 32, 2 ** 24, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    want = x.astype(rs._arrays.NUMPY[to])
    got = rs.cast(x, to, convention="ml_dtypes")
    assert same_bits(got, want)


@pytest.mark.exhaustive
@pytest.mark.parametrize("to", ["bf16", "e4m3"])
def test_cast_equals_ml_dtypes_on_every_float32(to):
    dtype = rs._arrays.NUMPY[to]
    chunk = 2 ** 26
    for start in range(0, 2 ** 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        got = rs.cast(x, to, convention="ml_dtypes")
        assert same_bits(got, x.astype(dtype)), f"patterns from {start:#x}"


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                  "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "float16"])
def test_decode_equals_ml_dtypes_on_every_pattern(name):
    dtype = np.dtype(getattr(ml_dtypes, name, None) or name)
    bits = dtype.itemsize * 8 if not name.startswith(("float6", "float4")) else int(name[5])
    patterns = np.arange(2 ** bits, dtype=np.uint32).astype(np.uint16 if dtype.itemsize == 2 else np.uint8)
    x = patterns.view(dtype)
    want = x.astype(np.float64)
    got = rs.decode(x)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(rs.decode(patterns, format=rs._arrays.FROM_NUMPY[dtype]), want, equal_nan=True)


def test_torch_tensors_cast_like_numpy_arrays():
    import torch
    t = torch.randn(3, 5, 7).to(torch.bfloat16)
    assert same_bits(rs.to_numpy(rs.cast(t, "e4m3")), rs.cast(t.float().numpy().astype(ml_dtypes.bfloat16), "e4m3"))
    assert torch.equal(rs.cast(t.transpose(0, 2), "e5m2").view(torch.uint8),
                       rs.cast(t.transpose(0, 2).contiguous(), "e5m2").view(torch.uint8))


def test_stochastic_rounding_does_not_depend_on_threads():
    x = np.random.default_rng(4).standard_normal(1 << 20).astype(np.float32)
    one = rs.cast(x, "e4m3", rounding="sr", seed=9, threads=1)
    assert same_bits(one, rs.cast(x, "e4m3", rounding="sr", seed=9, threads=2))
    assert not same_bits(one, rs.cast(x, "e4m3", rounding="sr", seed=10, threads=2))


def test_cast_into_an_array_writes_the_same_bits():
    x = np.random.default_rng(5).standard_normal((3, 1000)).astype(np.float32)
    out = np.empty((3, 1000), ml_dtypes.float8_e5m2)
    assert rs.cast(x, "fp8_e5m2", rounding="sr", seed=2, out=out) is out
    assert same_bits(out, rs.cast(x, "e5m2", rounding="sr", seed=2))
    bits = np.empty(3000, np.uint8)
    rs.cast(x, "ue4m3", out=bits)
    assert same_bits(bits.reshape(3, 1000), rs.cast(x, "ue4m3"))
    with pytest.raises(TypeError, match="cannot hold"):
        rs.cast(x, "bf16", out=np.empty(1500, np.float32))
    with pytest.raises(ValueError, match="bytes"):
        rs.cast(x, "bf16", out=np.empty(2999, ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match="writable"):
        rs.cast(x, "bf16", out=np.empty((3000, 2), ml_dtypes.bfloat16)[:, 0])


SOURCE_TYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int8, np.uint16,
                np.int64, np.bool_]


@pytest.mark.parametrize("source_type", SOURCE_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("to", FORMATS)
def test_the_numpy_path_gives_the_general_paths_bits(source_type, to):
    """A C-contiguous numpy array takes the one-call path (numpy's C API); a strided view of the
    same values takes the general one. Same bits, dtype and shape, for every source and format,
    with a scale, stochastic rounding and saturation; 0-d and empty arrays too."""
    x = (special_inputs(np.random.default_rng(6))[:1200].astype(np.float64) * 3).reshape(40, 30)
    x = x.clip(-1e30, 1e30).astype(source_type) if source_type != np.bool_ else x > 0
    strided = np.repeat(x, 2, axis=1)[:, ::2]
    assert not strided.flags.c_contiguous and strided.tobytes() == x.tobytes()
    for options in [{}, {"rounding": "sr:7", "seed": 3}, {"scale": 0.375, "saturate": True}, {"flush_output": True}]:
        fast = rs.cast(x, to, **options)
        assert same_bits(fast, rs.cast(strided, to, **options)), options
    for shape in [(), (0,), (2, 0, 3)]:
        small = np.zeros(shape, source_type)
        assert same_bits(rs.cast(small, to), rs.cast(np.zeros(shape + (2,), source_type)[..., 0], to))


def test_arguments_the_numpy_path_does_not_take_give_the_general_paths_answers():
    x = np.array([1.0, 2.5, -3.25], np.float32)
    want = rs.cast(x, "e4m3", rounding="rtz", seed=5, threads=1)
    assert same_bits(rs.cast(x, np.str_("e4m3"), rounding="rtz", seed=np.int64(5), threads=np.int32(1)), want)
    assert same_bits(rs.cast(x, "e4m3", rounding="rtz", seed=5, threads=1, flush_input=0, scale=np.float32(1)), want)
    for seed in [-1, 5.0, 2**64, True]:
        with pytest.raises(ValueError, match="seed"):
            rs.cast(x, "e4m3", seed=seed)
    with pytest.raises(ValueError, match="threads"):
        rs.cast(x, "e4m3", threads=-2)
    with pytest.raises(ValueError, match="scale must be finite, not nan"):
        rs.cast(x, "e4m3", scale=float("nan"))
    with pytest.raises(ValueError, match="^to: unknown format 'e9m9'"):
        rs.cast(x, "e9m9")
    with pytest.raises(TypeError):
        rs.cast(None, "e4m3")


def test_the_torch_convention_is_torchs_cast_and_warns_for_an_unchecked_torch(monkeypatch):
    """convention="torch" gives the installed torch's Tensor.to bits on its special values (all
    2^32 float32 inputs: tests/peer/test_torch_exhaustive.py), and warns once where torch is
    not the release it was checked with."""
    import sys
    import types
    import warnings
    torch = pytest.importorskip("torch")
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 500.0, -1.0, 0.0, 1.5], dtype=np.float32)
    for to, dtype in [("bf16", torch.bfloat16), ("f16", torch.float16), ("e4m3", torch.float8_e4m3fn),
                      ("e5m2", torch.float8_e5m2), ("e8m0", torch.float8_e8m0fnu)]:
        width = torch.int16 if dtype.itemsize == 2 else torch.uint8
        want = torch.from_numpy(x).to(dtype).view(width).numpy().view(np.uint16 if dtype.itemsize == 2 else np.uint8)
        got = rs.cast(x, to, convention="torch").view(want.dtype)
        assert np.array_equal(got, want), (to, got, want)
    rs._check_torch_convention.cache_clear()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="9.1.0"))
    with pytest.warns(UserWarning, match="installed torch 9.1.0 was not checked"):
        rs.cast(x, "bf16", convention="torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rs.cast(x, "bf16", convention="torch")  # once
    rs._check_torch_convention.cache_clear()


def test_formats_by_any_spelling_and_by_dtype_object():
    import ml_dtypes
    torch = pytest.importorskip("torch")
    x = np.array([1.1, -500.0, 3e-3], dtype=np.float32)
    for name, spellings in [("e4m3", ["E4M3", "float8_e4m3fn", "fp8_e4m3", ml_dtypes.float8_e4m3fn,
                                      np.dtype(ml_dtypes.float8_e4m3fn), torch.float8_e4m3fn]),
                            ("f16", ["F16", "fp16", "half", "float16", np.float16, torch.float16]),
                            ("bf16", ["BF16", "bfloat16", ml_dtypes.bfloat16, torch.bfloat16]),
                            ("e5m2", ["E5M2", torch.float8_e5m2])]:
        want = rs.cast(x, name)
        for s in spellings:
            got = rs.cast(x, s)
            assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8)), s
    with pytest.raises(ValueError, match=r"^to: unknown format 'e4m4'; did you mean 'e4m3'\? \(known: "):
        rs.cast(x, "e4m4")
    with pytest.raises(TypeError, match="to: expected a format name or a numpy, ml_dtypes or torch dtype, not int"):
        rs.cast(x, 3)
    with pytest.raises(TypeError, match="to: expected"):
        rs.cast(x, object())


def test_the_version_is_the_builds():
    assert rs.__version__ == subprocess.run([os.environ["ROUNDSCOPE_CLI"], "--version"], capture_output=True,
                                            text=True, check=True).stdout.split()[-1]


def test_an_out_that_shares_memory_with_x_is_refused_before_any_write():
    x = np.linspace(-3, 3, 200_000, dtype=np.float32)
    before = x.copy()
    for out in (x.view(np.uint16)[:x.size], x.view(np.uint16)[x.size // 2:x.size // 2 + x.size],
                x.view(np.uint8)[: x.size * 2].view(ml_dtypes.bfloat16)):
        with pytest.raises(ValueError, match="^out: shares memory with x"):
            rs.cast(x, "bf16", out=out)
        assert np.array_equal(x.view(np.uint32), before.view(np.uint32))
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x)
    with pytest.raises(ValueError, match="^out: shares memory with x"):
        rs.cast(t, "bf16", out=x.view(np.uint16)[:x.size])
    out = np.empty(x.size, dtype=ml_dtypes.bfloat16)  # its own memory: fine
    assert np.array_equal(rs.cast(x, "bf16", out=out).view(np.uint16), rs.cast(x, "bf16").view(np.uint16))
