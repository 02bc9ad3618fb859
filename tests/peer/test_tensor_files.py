"""Tensor files against their peers: files written by numpy, ml_dtypes, safetensors and PyTorch
are read by `roundscope inspect`, whose statistics must equal values computed here
independently (exactly where the contract says exact); files written by roundscope are read
back by those libraries bit for bit; hostile files give one-line errors with exit code 2.

Usage: test_tensor_files.py PATH/TO/roundscope   (with numpy, ml_dtypes, safetensors, torch)
"""
import json
import warnings
import os
import sys
import tempfile
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import safetensors.numpy
import safetensors.torch
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))  # cli_harness
from cli_harness import check, finish, one_line_error, run as run_binary  # noqa: E402

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope-tensor-files-")
rng = np.random.default_rng(2026)
warnings.filterwarnings("ignore", "invalid value encountered in cast")


def run(*args):
    return run_binary(BINARY, *args)


def inspect(path, *extra):
    rc, out, err = run("inspect", path, "--json", "--checksum", *extra)
    if rc != 0:
        check(f"inspect {path}", False, err)
        return None
    return {t["name"]: t for t in json.loads(out)["tensors"]}


# ---- what inspect must report, computed from the values -------------------------------------

ML_TYPES = {  # roundscope dtype -> ml_dtypes type, bits used
    "bf16": (ml_dtypes.bfloat16, 16), "e4m3": (ml_dtypes.float8_e4m3fn, 8), "e5m2": (ml_dtypes.float8_e5m2, 8),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 8), "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 8),
    "e8m0": (ml_dtypes.float8_e8m0fnu, 8), "e2m3": (ml_dtypes.float6_e2m3fn, 6), "e3m2": (ml_dtypes.float6_e3m2fn, 6),
    "e2m1": (ml_dtypes.float4_e2m1fn, 4),
}
NUMPY_NAMES = {"bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16, "u32": np.uint32,
               "i32": np.int32, "u64": np.uint64, "i64": np.int64, "f16": np.float16, "f32": np.float32,
               "f64": np.float64}
TARGETS = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def smallest_normal(dtype):
    if dtype in ("f16", "f32", "f64"):
        return float(np.finfo(NUMPY_NAMES[dtype]).smallest_normal)
    if dtype in ML_TYPES:
        return float(ml_dtypes.finfo(ML_TYPES[dtype][0]).smallest_normal)
    return 0.0


def representable(x, target):
    """x (float64, finite) equals a value of target: the round trip through ml_dtypes keeps it."""
    with np.errstate(all="ignore"):
        back = x.astype(target).astype(np.float64)
    return back == x


def expected_stats(values, dtype):
    """values: float64 array of the tensor's exact values."""
    v = values.ravel()
    finite = v[np.isfinite(v)]
    e = {"count": v.size, "nan": int(np.isnan(v).sum()), "inf": int(np.isinf(v).sum()),
         "zeros": int((finite == 0).sum()),
         "subnormals": int(((finite != 0) & (np.abs(finite) < smallest_normal(dtype))).sum())}
    if finite.size:
        e["min"], e["max"] = float(finite.min()) + 0.0, float(finite.max()) + 0.0
        total = sum((Fraction(float(x)) for x in finite), Fraction(0))
        e["mean"] = float(total / finite.size)  # correctly rounded
        mean = total / finite.size
        e["var"] = sum(((Fraction(float(x)) - mean) ** 2 for x in finite), Fraction(0)) / finite.size
        e["exact_fraction"] = {k: float(representable(finite, t).sum()) / finite.size for k, t in TARGETS.items()}
    return e


def compare(name, got, values, dtype, crc, exact_moments):
    if got is None:
        return
    e = expected_stats(values, dtype)
    check(f"{name} dtype", got["dtype"] == dtype, got["dtype"])
    check(f"{name} shape", got["shape"] == list(values.shape), got["shape"])
    for k in ("count", "nan", "inf", "zeros", "subnormals"):
        check(f"{name} {k}", got[k] == e[k], f"{got[k]} != {e[k]}")
    check(f"{name} crc32", got["crc32"] == crc, f"{got['crc32']} != {crc}")
    if "min" not in e:
        check(f"{name} empty moments", got["min"] is None and got["mean"] is None, got)
        return
    check(f"{name} min", got["min"] == e["min"], f"{got['min']} != {e['min']}")
    check(f"{name} max", got["max"] == e["max"], f"{got['max']} != {e['max']}")
    std = float(e["var"]) ** 0.5
    if exact_moments:  # histogram path: mean correctly rounded, std within an ulp
        check(f"{name} mean", got["mean"] == e["mean"], f"{got['mean']!r} != {e['mean']!r}")
        check(f"{name} std", abs(got["std"] - std) <= 2.3e-16 * std, f"{got['std']!r} vs {std!r}")
    else:
        scale = max(abs(e["min"]), abs(e["max"]))
        check(f"{name} mean", abs(got["mean"] - e["mean"]) <= 1e-15 * scale, f"{got['mean']!r} vs {e['mean']!r}")
        check(f"{name} std", abs(got["std"] - std) <= 1e-12 * max(std, 1e-300), f"{got['std']!r} vs {std!r}")
    for k, frac in e["exact_fraction"].items():
        check(f"{name} exact {k}", got["exact_fraction"][k] == frac, f"{got['exact_fraction'][k]} != {frac}")


def crc_of(array):
    """CRC-32 of the elements in C order, little-endian, one storage unit each."""
    a = np.ascontiguousarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return zlib.crc32(a.tobytes())


def sample(dtype, shape):
    """Values of a numpy dtype with the specials mixed in."""
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    x = rng.standard_normal(n) * rng.choice([1e-6, 1.0, 1e3], n)
    x = x.astype(dtype)
    x[:: max(1, n // 7)] = 0
    if n > 20:
        x[3], x[5], x[7] = np.nan, np.inf, -np.inf
        x[9] = np.finfo(dtype).smallest_subnormal
    return x.reshape(shape)


# ---- 1. numpy files: every numpy dtype, big-endian, Fortran order, every format version ----
for name, dtype in NUMPY_NAMES.items():
    a = sample(dtype, (37, 29))
    path = os.path.join(TMP, f"np_{name}.npy")
    np.save(path, a)
    got = inspect(path)
    compare(f"npy {name}", got and got[f"np_{name}"], a.astype(np.float64), name, crc_of(a),
            exact_moments=a.dtype.itemsize <= 2)

a = sample(np.float32, (6, 5, 4))
for variant, array, version in (("big_endian", a.astype(">f4"), (1, 0)), ("fortran", np.asfortranarray(a), (1, 0)),
                                ("v2", a, (2, 0)), ("v3", a, (3, 0)), ("big_fortran", np.asfortranarray(a.astype(">f4")), (2, 0))):
    path = os.path.join(TMP, f"{variant}.npy")
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version)
    got = inspect(path)
    compare(f"npy {variant}", got and got[variant], a.astype(np.float64), "f32", crc_of(a), exact_moments=False)

# ml_dtypes arrays: an opaque descr, read with --dtype; without it, the error says so.
for name, (t, bits) in ML_TYPES.items():
    storage = np.uint16 if bits == 16 else np.uint8
    patterns = rng.integers(0, 1 << bits, 4000, dtype=np.uint32).astype(storage)
    a = patterns.view(t).reshape(40, 100)
    path = os.path.join(TMP, f"ml_{name}.npy")
    np.save(path, a)
    rc, out, err = run("inspect", path)
    check(f"ml {name} needs --dtype", one_line_error(rc, err, path, "--dtype"), err)
    got = inspect(path, "--dtype", name)
    compare(f"ml {name}", got and got[f"ml_{name}"], a.astype(np.float64), name, crc_of(patterns), exact_moments=True)
    got_alias = inspect(path, "--dtype", t.__name__)
    check(f"ml {name} by ml_dtypes name", got_alias is not None and got_alias[f"ml_{name}"]["dtype"] == name)

# ---- 2. safetensors files written by the safetensors library ----------------------------------
arrays = {name: sample(dtype, (23, 17)) for name, dtype in NUMPY_NAMES.items()}
path = os.path.join(TMP, "numpy.safetensors")
safetensors.numpy.save_file(arrays, path, metadata={"layer": "3"})
got = inspect(path)
for name, a in arrays.items():
    compare(f"st {name}", got and got[name], a.astype(np.float64), name, crc_of(a), exact_moments=a.dtype.itemsize <= 2)

TORCH_TYPES = {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
               "e4m3fnuz": torch.float8_e4m3fnuz, "e5m2fnuz": torch.float8_e5m2fnuz, "e8m0": torch.float8_e8m0fnu}
tensors, expected = {}, {}
for name, tt in TORCH_TYPES.items():
    bits = 16 if name == "bf16" else 8
    patterns = rng.integers(0, 1 << bits, (31, 19), dtype=np.uint32).astype(np.uint16 if bits == 16 else np.uint8)
    storage = torch.int16 if bits == 16 else torch.uint8
    tensors[name] = torch.from_numpy(patterns.view(np.int16) if bits == 16 else patterns).view(tt)
    expected[name] = (patterns.view(ML_TYPES[name][0]).astype(np.float64), crc_of(patterns))
# float4_e2m1fn_x2: two values a byte, the first in the low nibble; the header's shape is logical.
packed = rng.integers(0, 256, (8, 6), dtype=np.uint8)
tensors["fp4"] = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
nibbles = np.stack([packed & 15, packed >> 4], axis=-1).reshape(8, 12)
expected["fp4"] = (nibbles.view(ml_dtypes.float4_e2m1fn).astype(np.float64), crc_of(nibbles))
path = os.path.join(TMP, "torch.safetensors")
safetensors.torch.save_file(tensors, path)
got = inspect(path)
for name, (values, crc) in expected.items():
    dtype = "e2m1" if name == "fp4" else name
    compare(f"torch {name}", got and got[name], values, dtype, crc, exact_moments=True)

# ---- 3. files written by roundscope, read by the peers -----------------------------------------
# Casts use --convention ml_dtypes (no saturation, NaN kept with its sign), the peer's rules.
source = rng.standard_normal((16, 24)).astype(np.float32) * 3
source[0, :4] = [0.0, -0.0, 1e-30, 300.0]
path = os.path.join(TMP, "source.safetensors")
safetensors.numpy.save_file({"x": source}, path)
for fmt, ml in (("bf16", ml_dtypes.bfloat16), ("f16", np.float16), ("e4m3", ml_dtypes.float8_e4m3fn),
                ("e5m2", ml_dtypes.float8_e5m2), ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("e8m0", None),
                ("e2m1", ml_dtypes.float4_e2m1fn), ("e2m3", ml_dtypes.float6_e2m3fn), ("e3m2", ml_dtypes.float6_e3m2fn)):
    out = os.path.join(TMP, f"cast_{fmt}.safetensors")
    rc, _, err = run("cast", path, "--to", fmt, "--convention", "ml_dtypes", "-o", out)
    check(f"cast {fmt} exit", rc == 0, err)
    if ml is None or rc != 0:
        continue
    want = source.astype(ml).view(np.uint16 if ml(0).itemsize == 2 else np.uint8)
    header_len = int.from_bytes(open(out, "rb").read(8), "little")
    header = json.loads(open(out, "rb").read(8 + header_len)[8:])
    if fmt in ("e2m3", "e3m2"):  # packed 6-bit: no library reads F6; check the header and our own reading
        check(f"cast {fmt} header", header["x"]["dtype"] == f"F6_{fmt.upper()}", header)
        got = inspect(out)
        check(f"cast {fmt} values", got is not None and got["x"]["crc32"] == crc_of(want), got and got["x"])
        continue
    loaded = safetensors.torch.load_file(out)["x"]
    if fmt == "e2m1":
        b = loaded.view(torch.uint8).numpy()
        bits = np.stack([b & 15, b >> 4], axis=-1).reshape(source.shape)
    else:
        bits = loaded.view(torch.int16 if want.itemsize == 2 else torch.uint8).numpy().view(want.dtype)
    check(f"cast {fmt} read by safetensors+torch", np.array_equal(bits, want), f"{bits.ravel()[:8]} vs {want.ravel()[:8]}")

# Formats without a safetensors dtype: U8 bit patterns, the format in __metadata__.
out = os.path.join(TMP, "cast_ue4m3.safetensors")
rc, _, err = run("cast", path, "--to", "ue4m3", "-o", out)
header = json.loads(open(out, "rb").read(8 + int.from_bytes(open(out, "rb").read(8), "little"))[8:])
check("ue4m3 as U8", rc == 0 and header["x"]["dtype"] == "U8" and header["__metadata__"]["roundscope.format.x"] == "ue4m3",
      header)
got = inspect(out)
check("ue4m3 read back", got is not None and got["x"]["dtype"] == "ue4m3", got)

# .npy written by roundscope: numpy reads it; ml_dtypes types come back as the opaque void type.
out = os.path.join(TMP, "cast_bf16.npy")
rc, _, err = run("cast", os.path.join(TMP, "np_f32.npy"), "--to", "bf16", "--convention", "ml_dtypes", "-o", out)
f32 = np.load(os.path.join(TMP, "np_f32.npy"))
back = np.load(out)
check("npy bf16 read by numpy", rc == 0 and back.dtype == np.dtype("V2") and
      np.array_equal(back.view(np.uint16), f32.astype(ml_dtypes.bfloat16).view(np.uint16)), err)
with open(out, "rb") as f:
    raw = f.read(12)
check("npy data aligned to 64", (os.path.getsize(out) - back.nbytes) % 64 == 0 and raw[6] == 1)
out = os.path.join(TMP, "cast_f16.npy")
rc, _, err = run("cast", os.path.join(TMP, "np_f32.npy"), "--to", "f16", "--convention", "ml_dtypes", "-o", out)
check("npy f16 read by numpy", rc == 0 and np.array_equal(np.load(out).view(np.uint16), f32.astype(np.float16).view(np.uint16)),
      err)

# --scale: one rounding of the exact product (checked here where double rounding cannot hide it).
x = np.array([1.0, 3.0, 5.0, 7.0, 0.1], dtype=np.float32)
np.save(os.path.join(TMP, "scale_in.npy"), x)
out = os.path.join(TMP, "scale_out.npy")
rc, _, err = run("cast", os.path.join(TMP, "scale_in.npy"), "--to", "e4m3", "--scale", "0.2", "-o", out)
want = [(Fraction(float(v)) * Fraction(0.2)) for v in x]
got_values = np.load(out).view(ml_dtypes.float8_e4m3fn).astype(np.float64) if rc == 0 else []
ok = rc == 0
for g, w in zip(got_values, want):
    # the nearest e4m3 value to the exact product (ties to even never arise for these inputs)
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    grid = grid[np.isfinite(grid)]
    nearest = min(grid, key=lambda v: (abs(Fraction(float(v)) - w), v))
    ok = ok and g == nearest
check("cast --scale rounds the exact product once", ok, f"{got_values} {err}")

# ---- 4. hostile files through the CLI ------------------------------------------------------------
def write(name, data):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


hostile = {
    "truncated.safetensors": (b"\x10\x00\x00", "truncated"),
    "huge_header.safetensors": ((1 << 40).to_bytes(8, "little") + b"{}", "100 MB"),
    "bad_json.safetensors": (len(b"{nope").to_bytes(8, "little") + b"{nope", "invalid JSON"),
    "overlap.safetensors": (None, "overlaps"),
    "bad_magic.npy": (b"\x93NUMPZ\x01\x00\x00\x00", "bad magic"),
    "short.npy": (None, "needs 400 bytes of data"),
}
h = b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}'
hostile["overlap.safetensors"] = (len(h).to_bytes(8, "little") + h + bytes(6), "overlaps")
full = open(os.path.join(TMP, "np_f32.npy"), "rb").read()
hostile["short.npy"] = (full[: len(full) - len(f32.tobytes()) + 400], "of data but the file has 400")
for name, (data, phrase) in hostile.items():
    p = write(name, data)
    rc, out, err = run("inspect", p)
    check(f"hostile {name}", one_line_error(rc, err, p, phrase) and out == "", err)
rc, out, err = run("inspect", os.path.join(TMP, "missing.safetensors"))
check("missing file", one_line_error(rc, err, "missing.safetensors", "cannot open"), err)
rc, out, err = run("inspect", os.path.join(TMP, "np_f32.npy"), "--dtype", "f7")
check("unknown dtype option", one_line_error(rc, err, "--dtype", "f7"), err)
rc, out, err = run("cast", path, "--to", "bf16", "-t", "nope", "-o", os.path.join(TMP, "x.safetensors"))
check("cast unknown tensor", one_line_error(rc, err, "no tensor 'nope'"), err)

finish("test_tensor_files")
