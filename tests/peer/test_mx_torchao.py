"""`roundscope mx` against torchao's MX and NVFP4 reference quantizers (pure PyTorch on the
CPU): the same scales and elements on 10^5 random blocks for every element format and scale
rule both have, and NVFP4 single- and two-level. Where torchao's semantics differ from the
OCP rules roundscope follows, the difference is named and checked exactly:

  1. scale 2^-127 (E8M0 0): torchao stores it, but divides by 2^-126 (FLOOR, CEIL, EVEN: it
     clamps the float32 scale to the smallest normal) or by 1 (RCEIL) instead of 2^-127;
  2. a block holding Inf: roundscope gives it the NaN scale 0xFF; torchao's FLOOR, CEIL and
     EVEN read Inf's exponent field as 2^128 (scale clamp(128 - emax) + 127), its RCEIL 0xFE;
  3. a block holding NaN: both give the NaN scale 0xFF; roundscope encodes every element as
     NaN (0 where the format has no NaN). torchao's FLOOR, CEIL and EVEN divide by Inf and
     encode the finite elements as signed zeros; its RCEIL multiplies by NaN, giving FP8's NaN
     (as roundscope) and, for FP6/FP4, what its cast makes of NaN: e2m3 0x0C, e3m2 0x0E, e2m1 0x3."""
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch
from safetensors.numpy import save_file
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

from files_by_hand import read_safetensors

warnings.filterwarnings("ignore")
rng = np.random.default_rng(4)
BLOCKS, K = 100_000, 32

# roundscope format -> (torchao element dtype, ml_dtypes type, emax_elem, max, has NaN)
FORMATS = {
    "mxfp8_e4m3": (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn, 8, 448.0, True),
    "mxfp8_e5m2": (torch.float8_e5m2, ml_dtypes.float8_e5m2, 15, 57344.0, True),
    "mxfp6_e2m3": ("fp6_e2m3", ml_dtypes.float6_e2m3fn, 2, 7.5, False),
    "mxfp6_e3m2": ("fp6_e3m2", ml_dtypes.float6_e3m2fn, 4, 28.0, False),
    "mxfp4": (torch.float4_e2m1fn_x2, ml_dtypes.float4_e2m1fn, 2, 6.0, False),
}
RULES = {"floor": ScaleCalculationMode.FLOOR, "ceil": ScaleCalculationMode.CEIL, "even": ScaleCalculationMode.EVEN,
         "rceil": ScaleCalculationMode.RCEIL}



def as_uint8(t):
    dtype, shape, raw = t
    return dtype, shape, np.frombuffer(raw, np.uint8)


def element_bits(dtype, shape, raw):
    """One uint8 per element, from roundscope's packed F4 / F6 or byte dtypes."""
    if dtype == "F4":
        return np.stack([raw & 15, raw >> 4], axis=-1).reshape(shape)
    if dtype.startswith("F6"):
        b = raw.reshape(-1, 3).astype(np.uint16)
        e = np.stack([b[:, 0] & 63, (b[:, 0] >> 6) | ((b[:, 1] & 15) << 2), (b[:, 1] >> 4) | ((b[:, 2] & 3) << 4),
                      b[:, 2] >> 2], -1)
        return e.astype(np.uint8).reshape(shape)
    return raw.reshape(shape)


def roundscope_mx(cli, folder, x, fmt, *options):
    save_file({"x": x}, folder / "in.safetensors")
    cli.run("mx", folder / "in.safetensors", "--format", fmt, "-o", folder / "out.safetensors", *options)
    t = read_safetensors(folder / "out.safetensors")[0]
    return element_bits(*as_uint8(t["x.elements"])), element_bits(*as_uint8(t["x.scales"]))


def blocks():
    """Blocks of every kind: Gaussian at random scales, raw float32 patterns (tiny and huge
    exponents), zeros, subnormals, exact powers of two and ties, some with NaN or Inf."""
    x = rng.standard_normal((BLOCKS, K)) * np.exp2(rng.integers(-20, 20, (BLOCKS, 1)))
    kind = rng.integers(0, 10, BLOCKS)
    raw = rng.integers(0, 2**32, (BLOCKS, K), dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
    raw[~np.isfinite(raw)] = 1.0
    x[kind == 1] = raw[kind == 1]
    x[kind == 2] = 0.0
    x[kind == 3] = np.ldexp(rng.integers(1, 2**23, (int((kind == 3).sum()), K)), -149)  # subnormal
    n_ties = int((kind == 4).sum())
    ties = np.ldexp(rng.integers(1, 16, (n_ties, K)) / 8.0, rng.integers(-10, 10, (n_ties, 1)))
    x[kind == 4] = ties
    x[kind < 5] *= np.where(rng.random((int((kind < 5).sum()), K)) < 0.5, -1, 1)
    x = x.astype(np.float32)
    x[rng.random(BLOCKS) < 0.01, 3] = np.nan
    x[rng.random(BLOCKS) < 0.01, 7] = -np.inf
    return x


X = blocks()
HAS_NAN = np.isnan(X).any(axis=1)
HAS_INF = np.isinf(X).any(axis=1) & ~HAS_NAN


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_mx_equals_torchao_or_differs_as_named(cli, tmp_path, fmt, rule):
    elem, ml, emax, maxval, elem_has_nan = FORMATS[fmt]
    x, has_nan, has_inf = X, HAS_NAN, HAS_INF
    ours_e, ours_s = roundscope_mx(cli, tmp_path, x, fmt, "--scale-rule", rule)
    s, d = to_mx(torch.from_numpy(x.copy()), elem, K, RULES[rule])
    theirs_s = s.view(torch.uint8).numpy().reshape(BLOCKS)
    if elem == torch.float4_e2m1fn_x2:
        theirs_e = unpack_uint4(d.view(torch.uint8).contiguous()).numpy().reshape(BLOCKS, K)
    else:
        theirs_e = d.view(torch.uint8).numpy().reshape(BLOCKS, K)
    ours_s = ours_s.reshape(BLOCKS)
    tiny = (ours_s == 0) & ~has_nan & ~has_inf
    plain = ~has_nan & ~has_inf & ~tiny
    assert plain.sum() > 60_000, "blocks compared"
    assert np.array_equal(ours_s[plain], theirs_s[plain]), f"{(ours_s[plain] != theirs_s[plain]).sum()} scales differ"
    assert np.array_equal(ours_e[plain], theirs_e[plain]), \
        f"{(ours_e[plain] != theirs_e[plain]).any(axis=1).sum()} blocks' elements differ"
    # 1. scale 2^-127: torchao stores it but divides by 2^-126 (or by 1 under RCEIL).
    divisor = 1.0 if rule == "rceil" else 2.0**-126
    want = np.clip(x[tiny].astype(np.float64) / divisor, -maxval, maxval).astype(ml).view(np.uint8)
    ours_want = np.clip(x[tiny].astype(np.float64) * 2.0**127, -maxval, maxval).astype(ml).view(np.uint8)
    assert tiny.sum() > 1000, "difference 1 (scale 2^-127) seen"
    assert np.array_equal(theirs_s[tiny], ours_s[tiny]) and np.array_equal(theirs_e[tiny], want)
    assert np.array_equal(ours_e[tiny], ours_want), "roundscope divides by 2^-127"
    # 2. Inf: NaN scale here; 2^128's exponent (or 0xFE under RCEIL) in torchao.
    inf_scale = 254 if rule == "rceil" else min(128 - emax, 128) + 127
    assert has_inf.sum() > 100 and (ours_s[has_inf] == 255).all()
    assert (theirs_s[has_inf] == inf_scale).all(), np.unique(theirs_s[has_inf])
    # 3. NaN: both scale 0xFF; elements differ in kind.
    nan_element = 0x7F if elem_has_nan else 0
    assert has_nan.sum() > 100 and (ours_s[has_nan] == 255).all() and (theirs_s[has_nan] == 255).all()
    assert (ours_e[has_nan] == nan_element).all()
    if rule == "rceil":
        nan_cast = {"mxfp6_e2m3": 0x0C, "mxfp6_e3m2": 0x0E, "mxfp4": 0x3}.get(fmt, 0x7F)
        assert (theirs_e[has_nan] == nan_cast).all(), "torchao's elements are its cast of NaN"
    else:
        magnitude = 0x7F if elem_has_nan else (0x1F if "fp6" in fmt else 0x7)
        finite = np.isfinite(x[has_nan])
        assert (theirs_e[has_nan][finite] & magnitude).max() == 0, "torchao's finite elements are zeros"


@pytest.mark.parametrize("level", ["single", "two"])
def test_nvfp4_equals_torchao(cli, tmp_path, level):
    """Single- and two-level, on finite tensors (roundscope refuses NaN/Inf for NVFP4)."""
    y = X[~HAS_NAN & ~HAS_INF][:60_000].reshape(-1, 64)
    y = np.ascontiguousarray(y[np.isfinite(y).all(axis=1)])
    yt = torch.from_numpy(y)
    if level == "single":
        options, pts = ("--single-level",), None
    else:
        options, pts = (), per_tensor_amax_to_scale(torch.amax(torch.abs(yt)))
    ours_e, ours_s = roundscope_mx(cli, tmp_path, y, "nvfp4", *options)
    s, d = nvfp4_quantize(yt, 16, pts)
    theirs_s = s.view(torch.uint8).numpy().reshape(ours_s.shape)
    theirs_e = unpack_uint4(d.view(torch.uint8).contiguous()).numpy().reshape(ours_e.shape)
    assert np.array_equal(ours_s, theirs_s), f"{(ours_s != theirs_s).sum()} of {ours_s.size} scales differ"
    assert np.array_equal(ours_e, theirs_e), f"{(ours_e != theirs_e).sum()} of {ours_e.size} elements differ"


@pytest.fixture
def small(tmp_path):
    v = np.ascontiguousarray(X[:64][~HAS_NAN[:64] & ~HAS_INF[:64]][:32])
    save_file({"v": v}, tmp_path / "small.safetensors")
    return tmp_path / "small.safetensors"


def test_dequant_writes_the_values_elements_and_scales(cli, small, tmp_path):
    out = tmp_path / "out.safetensors"
    cli.run("mx", small, "--format", "mxfp8_e4m3", "--axis", "0", "--offset", "5", "--dequant", "-o", out)
    t = read_safetensors(out)[0]
    assert set(t) == {"v", "v.elements", "v.scales"} and t["v"][0] == "F32" and t["v.scales"][1] == [2, 32]


def test_compare_rules_json(cli, small):
    rules = cli.json("mx", small, "--format", "mxfp4", "--compare-rules")["tensors"][0]["rules"]
    assert [r["rule"] for r in rules] == ["floor", "ceil", "even", "rceil"]
    assert rules[0]["blocks_differing_from_floor"] == 0 and rules[3]["saturated"] == 0
    assert all({"max_abs_error", "rms_error", "relative_rms_error", "saturated"} <= set(r) for r in rules)


@pytest.mark.parametrize("args, phrase", [
    (("--format", "mxfp9"), "unknown block format 'mxfp9'"),
    (("--format", "mxfp4", "--scale-rule", "round"), "unknown scale rule 'round'"),
    (("--format", "mxfp4", "--axis", "3", "-o", "out.safetensors"), "axis 3 is outside shape"),
    (("--format", "mxfp4", "--offset", "32", "-o", "out.safetensors"), "offset 32"),
    (("--format", "nvfp4", "--block", "32", "-o", "out.safetensors"), "NVFP4 blocks hold 16"),
    (("--format", "mxfp4"), "-o OUT"),
])
def test_bad_options_get_one_line(cli, small, args, phrase):
    assert phrase in cli.error("mx", small, *args, cwd=small.parent)


def test_nvfp4_refuses_nan_tensors(cli, tmp_path):
    save_file({"v": np.full((2, 16), np.nan, dtype=np.float32)}, tmp_path / "nan.safetensors")
    m = cli.error("mx", tmp_path / "nan.safetensors", "--format", "nvfp4", "-o", tmp_path / "out.safetensors")
    assert "tensor 'v'" in m and "not finite" in m, m
