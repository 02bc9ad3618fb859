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
     (as roundscope) and, for FP6/FP4, what its cast makes of NaN: e2m3 0x0C, e3m2 0x0E, e2m1 0x3.

Usage: test_mx_torchao.py PATH/TO/roundscope   (with torch, torchao, ml_dtypes, safetensors)
"""
import json
import os
import struct
import sys
import tempfile
import warnings

import ml_dtypes
import numpy as np
import torch
from safetensors.numpy import save_file
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import to_mx
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))  # cli_harness
from cli_harness import check, finish, run  # noqa: E402

warnings.filterwarnings("ignore")
BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope-mx-")
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


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    return {k: (v["dtype"], v["shape"], np.frombuffer(data[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]], np.uint8))
            for k, v in header.items() if k != "__metadata__"}


def element_bits(dtype, shape, raw):
    """One uint8 per element, from roundscope's packed F4 / F6 or byte dtypes."""
    if dtype == "F4":
        return np.stack([raw & 15, raw >> 4], axis=-1).reshape(shape)
    if dtype.startswith("F6"):
        b = raw.reshape(-1, 3).astype(np.uint16)
        e = np.stack([b[:, 0] & 63, (b[:, 0] >> 6) | ((b[:, 1] & 15) << 2), (b[:, 1] >> 4) | ((b[:, 2] & 3) << 4), b[:, 2] >> 2], -1)
        return e.astype(np.uint8).reshape(shape)
    return raw.reshape(shape)


def roundscope_mx(x, fmt, *options):
    src, out = os.path.join(TMP, "in.safetensors"), os.path.join(TMP, "out.safetensors")
    save_file({"x": x}, src)
    rc, _, err = run(BINARY, "mx", src, "--format", fmt, "-o", out, *options)
    if rc != 0:
        check(f"roundscope mx {fmt} {options}", False, err)
        return None, None
    t = read_safetensors(out)
    return element_bits(*t["x.elements"]), element_bits(*t["x.scales"])


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
    ties = np.ldexp(rng.integers(1, 16, (int((kind == 4).sum()), K)) / 8.0, rng.integers(-10, 10, (int((kind == 4).sum()), 1)))
    x[kind == 4] = ties
    x[kind < 5] *= np.where(rng.random((int((kind < 5).sum()), K)) < 0.5, -1, 1)
    x = x.astype(np.float32)
    x[rng.random(BLOCKS) < 0.01, 3] = np.nan
    x[rng.random(BLOCKS) < 0.01, 7] = -np.inf
    return x


x = blocks()
has_nan = np.isnan(x).any(axis=1)
has_inf = np.isinf(x).any(axis=1) & ~has_nan
xt = torch.from_numpy(x.copy())

for fmt, (elem, ml, emax, maxval, elem_has_nan) in FORMATS.items():
    for rule, mode in RULES.items():
        name = f"{fmt} {rule}"
        ours_e, ours_s = roundscope_mx(x, fmt, "--scale-rule", rule)
        if ours_e is None:
            continue
        s, d = to_mx(xt, elem, K, mode)
        theirs_s = s.view(torch.uint8).numpy().reshape(BLOCKS)
        if elem == torch.float4_e2m1fn_x2:
            theirs_e = unpack_uint4(d.view(torch.uint8).contiguous()).numpy().reshape(BLOCKS, K)
        else:
            theirs_e = d.view(torch.uint8).numpy().reshape(BLOCKS, K)
        ours_s = ours_s.reshape(BLOCKS)
        tiny = (ours_s == 0) & ~has_nan & ~has_inf
        plain = ~has_nan & ~has_inf & ~tiny
        check(f"{name} blocks compared", plain.sum() > 60_000, plain.sum())
        check(f"{name} scales", np.array_equal(ours_s[plain], theirs_s[plain]),
              f"{(ours_s[plain] != theirs_s[plain]).sum()} differ")
        check(f"{name} elements", np.array_equal(ours_e[plain], theirs_e[plain]),
              f"{(ours_e[plain] != theirs_e[plain]).any(axis=1).sum()} blocks differ")
        # 1. scale 2^-127: torchao stores it but divides by 2^-126 (or by 1 under RCEIL).
        divisor = 1.0 if rule == "rceil" else 2.0**-126
        want = np.clip(x[tiny].astype(np.float64) / divisor, -maxval, maxval).astype(ml).view(np.uint8)
        ours_want = np.clip(x[tiny].astype(np.float64) * 2.0**127, -maxval, maxval).astype(ml).view(np.uint8)
        check(f"{name} difference 1 (scale 2^-127) seen", tiny.sum() > 1000, tiny.sum())
        check(f"{name} difference 1: torchao", np.array_equal(theirs_s[tiny], ours_s[tiny]) and np.array_equal(theirs_e[tiny], want))
        check(f"{name} difference 1: roundscope divides by 2^-127", np.array_equal(ours_e[tiny], ours_want))
        # 2. Inf: NaN scale here; 2^128's exponent (or 0xFE under RCEIL) in torchao.
        inf_scale = 254 if rule == "rceil" else min(128 - emax, 128) + 127
        check(f"{name} difference 2 (Inf)", has_inf.sum() > 100 and (ours_s[has_inf] == 255).all() and
              (theirs_s[has_inf] == inf_scale).all(), np.unique(theirs_s[has_inf]))
        # 3. NaN: both scale 0xFF; elements differ in kind.
        nan_element = 0x7F if elem_has_nan else 0
        finite = np.isfinite(x[has_nan])
        check(f"{name} difference 3 (NaN)", has_nan.sum() > 100 and (ours_s[has_nan] == 255).all() and
              (theirs_s[has_nan] == 255).all() and (ours_e[has_nan] == nan_element).all(),
              f"{np.unique(theirs_s[has_nan])}")
        if rule == "rceil":
            nan_cast = {"mxfp6_e2m3": 0x0C, "mxfp6_e3m2": 0x0E, "mxfp4": 0x3}.get(fmt, 0x7F)
            check(f"{name} difference 3: torchao's elements are its cast of NaN", (theirs_e[has_nan] == nan_cast).all(),
                  np.unique(theirs_e[has_nan]))
        else:
            magnitude = 0x7F if elem_has_nan else (0x1F if "fp6" in fmt else 0x7)
            check(f"{name} difference 3: torchao's finite elements are zeros", (theirs_e[has_nan][finite] & magnitude).max() == 0)

# NVFP4: single- and two-level on finite tensors (roundscope refuses NaN/Inf for NVFP4).
y = x[~has_nan & ~has_inf][:60_000].reshape(-1, 64)
y = y[np.isfinite(y).all(axis=1)]
yt = torch.from_numpy(np.ascontiguousarray(y))
for level, options, pts in (("single", ("--single-level",), None),
                            ("two", (), per_tensor_amax_to_scale(torch.amax(torch.abs(yt))))):
    ours_e, ours_s = roundscope_mx(np.ascontiguousarray(y), "nvfp4", *options)
    if ours_e is None:
        continue
    s, d = nvfp4_quantize(yt, 16, pts)
    theirs_s = s.view(torch.uint8).numpy().reshape(ours_s.shape)
    theirs_e = unpack_uint4(d.view(torch.uint8).contiguous()).numpy().reshape(ours_e.shape)
    check(f"nvfp4 {level}-level scales", np.array_equal(ours_s, theirs_s), f"{(ours_s != theirs_s).sum()} of {ours_s.size} differ")
    check(f"nvfp4 {level}-level elements", np.array_equal(ours_e, theirs_e), f"{(ours_e != theirs_e).sum()} of {ours_e.size} differ")

# The command line: --dequant, --compare-rules, and one-line errors with exit code 2.
small = np.ascontiguousarray(x[:64][~has_nan[:64] & ~has_inf[:64]][:32])
src = os.path.join(TMP, "small.safetensors")
save_file({"v": small}, src)
out = os.path.join(TMP, "small_out.safetensors")
rc, _, err = run(BINARY, "mx", src, "--format", "mxfp8_e4m3", "--axis", "0", "--offset", "5", "--dequant", "-o", out)
t = read_safetensors(out) if rc == 0 else {}
check("mx --dequant writes v, v.elements, v.scales", rc == 0 and set(t) == {"v", "v.elements", "v.scales"} and
      t["v"][0] == "F32" and t["v.scales"][1] == [2, 32], err)
rc, stdout, err = run(BINARY, "mx", src, "--format", "mxfp4", "--compare-rules", "--json")
doc = json.loads(stdout) if rc == 0 else {}
rules = doc.get("tensors", [{}])[0].get("rules", [])
check("mx --compare-rules JSON", rc == 0 and [r["rule"] for r in rules] == ["floor", "ceil", "even", "rceil"] and
      rules[0]["blocks_differing_from_floor"] == 0 and rules[3]["saturated"] == 0 and
      all({"max_abs_error", "rms_error", "relative_rms_error", "saturated"} <= set(r) for r in rules), stdout or err)
for args, phrase in ((("--format", "mxfp9"), "unknown block format 'mxfp9'"),
                     (("--format", "mxfp4", "--scale-rule", "round"), "unknown scale rule 'round'"),
                     (("--format", "mxfp4", "--axis", "3", "-o", out), "axis 3 is outside shape"),
                     (("--format", "mxfp4", "--offset", "32", "-o", out), "offset 32"),
                     (("--format", "nvfp4", "--block", "32", "-o", out), "NVFP4 blocks hold 16"),
                     (("--format", "mxfp4"), "-o OUT")):
    rc, _, err = run(BINARY, "mx", src, *args)
    check(f"mx error {args}", rc == 2 and err.count("\n") == 1 and phrase in err, err)
nan_src = os.path.join(TMP, "nan.safetensors")
save_file({"v": np.full((2, 16), np.nan, dtype=np.float32)}, nan_src)
rc, _, err = run(BINARY, "mx", nan_src, "--format", "nvfp4", "-o", out)
check("nvfp4 refuses NaN tensors", rc == 2 and "tensor 'v'" in err and "not finite" in err, err)

finish("test_mx_torchao")
