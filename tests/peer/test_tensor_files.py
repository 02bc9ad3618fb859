"""Tensor files against their peers: files written by numpy, ml_dtypes, safetensors and PyTorch
are read by `roundscope inspect`, whose statistics must equal values computed here
independently (exactly where the contract says exact); files written by roundscope are read
back by those libraries bit for bit; hostile files give one-line errors with exit code 2."""
import warnings
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

from files_by_hand import read_safetensors

rng = np.random.default_rng(2026)
warnings.filterwarnings("ignore", "invalid value encountered in cast")


def inspect(cli, path, *extra):
    return {t["name"]: t for t in cli.json("inspect", path, "--checksum", *extra)["tensors"]}


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


def compare(got, values, dtype, crc, exact_moments):
    e = expected_stats(values, dtype)
    assert got["dtype"] == dtype and got["shape"] == list(values.shape), got
    assert {k: got[k] for k in ("count", "nan", "inf", "zeros", "subnormals")} == \
        {k: e[k] for k in ("count", "nan", "inf", "zeros", "subnormals")}
    assert got["crc32"] == crc
    if "min" not in e:
        assert got["min"] is None and got["mean"] is None, "an empty tensor has no moments"
        return
    assert got["min"] == e["min"] and got["max"] == e["max"]
    std = float(e["var"]) ** 0.5
    if exact_moments:  # histogram path: mean correctly rounded, std within an ulp
        assert got["mean"] == e["mean"]
        assert abs(got["std"] - std) <= 2.3e-16 * std, (got["std"], std)
    else:
        scale = max(abs(e["min"]), abs(e["max"]))
        assert abs(got["mean"] - e["mean"]) <= 1e-15 * scale, (got["mean"], e["mean"])
        assert abs(got["std"] - std) <= 1e-12 * max(std, 1e-300), (got["std"], std)
    assert got["exact_fraction"] == e["exact_fraction"]


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

@pytest.mark.parametrize("name", list(NUMPY_NAMES))
def test_numpy_files_of_every_dtype(cli, tmp_path, name):
    a = sample(NUMPY_NAMES[name], (37, 29))
    np.save(tmp_path / f"np_{name}.npy", a)
    compare(inspect(cli, tmp_path / f"np_{name}.npy")[f"np_{name}"], a.astype(np.float64), name, crc_of(a),
            exact_moments=a.dtype.itemsize <= 2)


@pytest.mark.parametrize("variant", ["big_endian", "fortran", "v2", "v3", "big_fortran"])
def test_numpy_layouts_and_versions(cli, tmp_path, variant):
    a = sample(np.float32, (6, 5, 4))
    array, version = {"big_endian": (a.astype(">f4"), (1, 0)), "fortran": (np.asfortranarray(a), (1, 0)),
                      "v2": (a, (2, 0)), "v3": (a, (3, 0)),
                      "big_fortran": (np.asfortranarray(a.astype(">f4")), (2, 0))}[variant]
    with open(tmp_path / f"{variant}.npy", "wb") as f:
        np.lib.format.write_array(f, array, version=version)
    compare(inspect(cli, tmp_path / f"{variant}.npy")[variant], a.astype(np.float64), "f32", crc_of(a),
            exact_moments=False)


@pytest.mark.parametrize("name", list(ML_TYPES))
def test_ml_dtypes_arrays_need_their_dtype(cli, tmp_path, name):
    """An opaque descr, read with --dtype; without it, the error says so."""
    t, bits = ML_TYPES[name]
    storage = np.uint16 if bits == 16 else np.uint8
    patterns = rng.integers(0, 1 << bits, 4000, dtype=np.uint32).astype(storage)
    a = patterns.view(t).reshape(40, 100)
    path = tmp_path / f"ml_{name}.npy"
    np.save(path, a)
    m = cli.error("inspect", path)
    assert str(path) in m and "--dtype" in m, m
    compare(inspect(cli, path, "--dtype", name)[f"ml_{name}"], a.astype(np.float64), name, crc_of(patterns),
            exact_moments=True)
    assert inspect(cli, path, "--dtype", t.__name__)[f"ml_{name}"]["dtype"] == name, "by its ml_dtypes name"


# ---- 2. safetensors files written by the safetensors library ----------------------------------

def test_safetensors_written_from_numpy(cli, tmp_path):
    arrays = {name: sample(dtype, (23, 17)) for name, dtype in NUMPY_NAMES.items()}
    safetensors.numpy.save_file(arrays, tmp_path / "numpy.safetensors", metadata={"layer": "3"})
    got = inspect(cli, tmp_path / "numpy.safetensors")
    for name, a in arrays.items():
        compare(got[name], a.astype(np.float64), name, crc_of(a), exact_moments=a.dtype.itemsize <= 2)


def test_safetensors_written_from_torch(cli, tmp_path):
    torch_types = {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
                   "e4m3fnuz": torch.float8_e4m3fnuz, "e5m2fnuz": torch.float8_e5m2fnuz, "e8m0": torch.float8_e8m0fnu}
    tensors, expected = {}, {}
    for name, tt in torch_types.items():
        bits = 16 if name == "bf16" else 8
        patterns = rng.integers(0, 1 << bits, (31, 19), dtype=np.uint32).astype(np.uint16 if bits == 16 else np.uint8)
        tensors[name] = torch.from_numpy(patterns.view(np.int16) if bits == 16 else patterns).view(tt)
        expected[name] = (patterns.view(ML_TYPES[name][0]).astype(np.float64), crc_of(patterns))
    # float4_e2m1fn_x2: two values a byte, the first in the low nibble; the header's shape is logical.
    packed = rng.integers(0, 256, (8, 6), dtype=np.uint8)
    tensors["fp4"] = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
    nibbles = np.stack([packed & 15, packed >> 4], axis=-1).reshape(8, 12)
    expected["fp4"] = (nibbles.view(ml_dtypes.float4_e2m1fn).astype(np.float64), crc_of(nibbles))
    safetensors.torch.save_file(tensors, tmp_path / "torch.safetensors")
    got = inspect(cli, tmp_path / "torch.safetensors")
    for name, (values, crc) in expected.items():
        compare(got[name], values, "e2m1" if name == "fp4" else name, crc, exact_moments=True)


# ---- 3. files written by roundscope, read by the peers -----------------------------------------

@pytest.fixture(scope="module")
def source(tmp_path_factory):
    x = rng.standard_normal((16, 24)).astype(np.float32) * 3
    x[0, :4] = [0.0, -0.0, 1e-30, 300.0]
    path = tmp_path_factory.mktemp("source") / "source.safetensors"
    safetensors.numpy.save_file({"x": x}, path)
    return path, x


# Casts use --convention ml_dtypes (no saturation, NaN kept with its sign), the peer's rules.
@pytest.mark.parametrize("fmt, ml", [
    ("bf16", ml_dtypes.bfloat16), ("f16", np.float16), ("e4m3", ml_dtypes.float8_e4m3fn),
    ("e5m2", ml_dtypes.float8_e5m2), ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("e2m1", ml_dtypes.float4_e2m1fn),
    ("e2m3", ml_dtypes.float6_e2m3fn), ("e3m2", ml_dtypes.float6_e3m2fn)],
    ids=lambda v: v if isinstance(v, str) else "")
def test_casts_written_by_roundscope_are_read_by_the_peers(cli, source, tmp_path, fmt, ml):
    path, x = source
    out = tmp_path / f"cast_{fmt}.safetensors"
    cli.run("cast", path, "--to", fmt, "--convention", "ml_dtypes", "-o", out)
    want = x.astype(ml).view(np.uint16 if ml(0).itemsize == 2 else np.uint8)
    if fmt in ("e2m3", "e3m2"):  # packed 6-bit: no library reads F6; check the header and our own reading
        assert read_safetensors(out)[0]["x"][0] == f"F6_{fmt.upper()}"
        assert inspect(cli, out)["x"]["crc32"] == crc_of(want)
        return
    loaded = safetensors.torch.load_file(out)["x"]
    if fmt == "e2m1":
        b = loaded.view(torch.uint8).numpy()
        bits = np.stack([b & 15, b >> 4], axis=-1).reshape(x.shape)
    else:
        bits = loaded.view(torch.int16 if want.itemsize == 2 else torch.uint8).numpy().view(want.dtype)
    assert np.array_equal(bits, want), f"{bits.ravel()[:8]} vs {want.ravel()[:8]}"


def test_e8m0_casts(cli, source, tmp_path):
    cli.run("cast", source[0], "--to", "e8m0", "--convention", "ml_dtypes", "-o", tmp_path / "cast_e8m0.safetensors")


def test_formats_without_a_safetensors_dtype_are_u8_with_the_format_in_metadata(cli, source, tmp_path):
    out = tmp_path / "cast_ue4m3.safetensors"
    cli.run("cast", source[0], "--to", "ue4m3", "-o", out)
    tensors, metadata = read_safetensors(out)
    assert tensors["x"][0] == "U8" and metadata["roundscope.format.x"] == "ue4m3"
    assert inspect(cli, out)["x"]["dtype"] == "ue4m3"


def test_npy_written_by_roundscope_is_read_by_numpy(cli, tmp_path):
    """ml_dtypes types come back as the opaque void type; the data is aligned to 64 bytes."""
    f32 = sample(np.float32, (37, 29))
    np.save(tmp_path / "f32.npy", f32)
    out = tmp_path / "cast_bf16.npy"
    cli.run("cast", tmp_path / "f32.npy", "--to", "bf16", "--convention", "ml_dtypes", "-o", out)
    back = np.load(out)
    assert back.dtype == np.dtype("V2")
    assert np.array_equal(back.view(np.uint16), f32.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert (out.stat().st_size - back.nbytes) % 64 == 0 and out.read_bytes()[6] == 1
    cli.run("cast", tmp_path / "f32.npy", "--to", "f16", "--convention", "ml_dtypes", "-o", tmp_path / "cast_f16.npy")
    assert np.array_equal(np.load(tmp_path / "cast_f16.npy").view(np.uint16), f32.astype(np.float16).view(np.uint16))


def test_cast_with_a_scale_rounds_the_exact_product_once(cli, tmp_path):
    """Checked where double rounding cannot hide it."""
    x = np.array([1.0, 3.0, 5.0, 7.0, 0.1], dtype=np.float32)
    np.save(tmp_path / "scale_in.npy", x)
    cli.run("cast", tmp_path / "scale_in.npy", "--to", "e4m3", "--scale", "0.2", "-o", tmp_path / "scale_out.npy")
    got = np.load(tmp_path / "scale_out.npy").view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    grid = grid[np.isfinite(grid)]
    for g, v in zip(got, x):
        exact = Fraction(float(v)) * Fraction(0.2)
        # the nearest e4m3 value to the exact product (ties to even never arise for these inputs)
        assert g == min(grid, key=lambda e: (abs(Fraction(float(e)) - exact), e)), (v, g)


# ---- 4. hostile files through the CLI ------------------------------------------------------------

def hostile_files():
    h = b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}'
    return {
        "truncated.safetensors": (b"\x10\x00\x00", "truncated"),
        "huge_header.safetensors": ((1 << 40).to_bytes(8, "little") + b"{}", "100 MB"),
        "bad_json.safetensors": (len(b"{nope").to_bytes(8, "little") + b"{nope", "invalid JSON"),
        "overlap.safetensors": (len(h).to_bytes(8, "little") + h + bytes(6), "overlaps"),
        "bad_magic.npy": (b"\x93NUMPZ\x01\x00\x00\x00", "bad magic"),
    }


@pytest.mark.parametrize("name", list(hostile_files()))
def test_hostile_files_get_one_line(cli, tmp_path, name):
    data, phrase = hostile_files()[name]
    (tmp_path / name).write_bytes(data)
    m = cli.error("inspect", tmp_path / name)
    assert str(tmp_path / name) in m and phrase in m, m


def test_a_short_npy_says_how_much_data_it_lacks(cli, tmp_path):
    f32 = sample(np.float32, (37, 29))
    np.save(tmp_path / "full.npy", f32)
    full = (tmp_path / "full.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(full[: len(full) - len(f32.tobytes()) + 400])
    assert "of data but the file has 400" in cli.error("inspect", tmp_path / "short.npy")


def test_bad_names_get_one_line(cli, source, tmp_path):
    m = cli.error("inspect", tmp_path / "missing.safetensors")
    assert "missing.safetensors" in m and "cannot open" in m, m
    np.save(tmp_path / "f.npy", np.zeros(3, np.float32))
    m = cli.error("inspect", tmp_path / "f.npy", "--dtype", "f7")
    assert "--dtype" in m and "f7" in m, m
    assert "no tensor 'nope'" in cli.error("cast", source[0], "--to", "bf16", "-t", "nope", "-o",
                                           tmp_path / "x.safetensors")
