"""Hostile input to the Python package: every public function, given a bad value for each
argument it takes (wrong type, out of range, NaN, unknown name, missing or hostile file, aliasing
array), raises the exception that fits (TypeError, ValueError, OSError) with a message that
starts with the argument's name (or names the file), before any work: nothing is written to the
files around it, nothing printed, and the interpreter survives. Cases are data; each runs in a
scratch folder hashed before and after."""
import hashlib
import os

import ml_dtypes
import numpy as np
import pytest
import torch

import roundscope as rs
import roundscope.plot
import roundscope.torch as rst
from roundscope.dump import AttentionDump

RNG = np.random.default_rng(7)
Q = RNG.standard_normal((2, 32, 16)).astype(np.float32)
F32 = RNG.standard_normal(64).astype(np.float32)
NAN = float("nan")
INF = float("inf")


def make_scratch(folder):
    """The files the cases point at: good inputs, and hostile ones."""
    x = {n: RNG.standard_normal((2, 32, 16)).astype(np.float32) for n in ("q", "k", "v", "do")}
    rs.write(folder / "x.safetensors", x)
    kernel = rs.attention(x["q"], x["k"], x["v"], recipe="fa2-bf16")
    rs.write(folder / "dump.safetensors", {**x, "o": kernel["o"]}, {"recipe": "fa2-bf16"})
    good = (folder / "x.safetensors").read_bytes()
    (folder / "truncated.safetensors").write_bytes(good[: len(good) // 2])
    (folder / "empty.safetensors").write_bytes(b"")
    (folder / "garbage.safetensors").write_bytes(b"\xff" * 64)
    (folder / "huge_header.safetensors").write_bytes((2**60).to_bytes(8, "little") + b"{}")
    (folder / "x.txt").write_text("not a tensor file")
    (folder / "folder.safetensors").mkdir()
    os.mkfifo(folder / "fifo.safetensors")
    (folder / "loop.safetensors").symlink_to(folder / "loop.safetensors")
    nan_k = dict(x)
    nan_k["k"] = x["k"].copy()
    nan_k["k"][0, 3, 2] = np.nan
    rs.write(folder / "nan_k.safetensors", nan_k)
    rs.write(folder / "bad_meta.safetensors", x, {"causal": "maybe", "softmax_scale": "nan"})
    rs.write(folder / "no_v.safetensors", {"q": x["q"], "k": x["k"]})
    for name, (tensors, metadata) in PROBLEM_FILES.items():  # with the kernel's o, for compare too
        rs.write(folder / name, {**x, "o": kernel["o"], **tensors}, metadata)
    (folder / "micro").mkdir()
    rs.write(folder / "micro" / "negative.safetensors", {**x, "o": kernel["o"]},
             {"layer": "0", "step": "1", "micro_batch": "-2"})
    (folder / "dumps").mkdir()
    rs.write(folder / "dumps" / "a.safetensors", {**x, "o": kernel["o"]}, {"layer": "0", "step": "1"})
    rs.write(folder / "dumps" / "b.safetensors", {**x, "o": kernel["o"]}, {"layer": "0", "step": "1"})
    return folder


# Files whose attention problem a consumer cannot take (docs/cli.md, "The attention problem"):
# {name: (tensors beside q, k, v, do and o, metadata)}.
_K3 = RNG.standard_normal((3, 32, 16)).astype(np.float32)
PROBLEM_FILES = {
    "mask_nan.safetensors": ({"attn_mask": np.full((32, 32), np.nan, np.float32)}, None),
    "mask_posinf.safetensors": ({"attn_mask": np.where(np.eye(32) > 0, np.inf, 0).astype(np.float32)}, None),
    "mask_shape.safetensors": ({"attn_mask": np.zeros((32, 31), np.float32)}, None),
    "mask_int.safetensors": ({"attn_mask": np.zeros((32, 32), np.int32)}, None),
    "mask_and_bias.safetensors": ({"attn_mask": np.zeros((32, 32), np.float32),
                                   "bias": np.zeros((32, 32), np.float32)}, None),
    "gqa_3_of_2.safetensors": ({"k": _K3, "v": _K3}, None),
    "gqa_group.safetensors": ({}, {"gqa_group": "3"}),  # k repeated to q's 2 heads: no group of 3
    "gqa_group_text.safetensors": ({}, {"gqa_group": "two"}),
    "alignment.safetensors": ({}, {"causal": "true", "causal_alignment": "sideways"}),
    "window_neg.safetensors": ({}, {"window_left": "-5"}),
    "window_text.safetensors": ({}, {"window_right": "two"}),
    "softcap_nan.safetensors": ({}, {"softcap": "nan"}),
    "softcap_neg.safetensors": ({}, {"softcap": "-30"}),
    "dropout.safetensors": ({}, {"dropout_p": "0.1"}),
    "descale.safetensors": ({}, {"descale_q": "2"}),
}


def digest(folder):
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                out[path] = "not a regular file"
                continue
            with open(path, "rb") as f:
                out[path] = hashlib.sha256(f.read()).hexdigest()
    return out


def quantized_with(**change):
    q = rs.mx.quantize(F32.reshape(2, 32), "mxfp8_e4m3")
    return type(q)(**{**q.__dict__, **change})


# (id, call(scratch folder), exception type, pattern the message must match at its start)
CASES = []


def case(name, call, error, pattern):
    CASES.append(pytest.param(call, error, pattern, id=name))


# -- cast ---------------------------------------------------------------------------------------
for name, to, error, pattern in [
        ("int", 3, TypeError, "to: expected a format name"), ("none", None, TypeError, "to: expected"),
        ("empty", "", ValueError, "to: unknown format ''"), ("misspelt", "e4m4", ValueError, "to: unknown format 'e4m4'; did you mean 'e4m3'"),
        ("long", "x" * 1000, ValueError, "to: unknown format"), ("bytes", b"e4m3", TypeError, "to: expected"),
        ("object", object(), TypeError, "to: expected"), ("block format", "mxfp4", ValueError, "to: unknown format 'mxfp4'"),
        ("numpy int dtype", np.int32, ValueError, "to: unknown format"), ("torch complex", torch.complex64, ValueError, "to: unknown format"),
        ("control chars", "e4m3\n\x00", ValueError, "to: unknown format")]:
    case(f"cast to={name}", lambda s, to=to: rs.cast(F32, to), error, pattern)
for name, value, pattern in [
        ("nearest", "nearest", "rounding: unknown rounding mode 'nearest'; did you mean 'rne'"),
        ("sr:0", "sr:0", "rounding: rounding mode 'sr:0': N of sr:N must be an integer in 1..23"),
        ("sr:24", "sr:24", "rounding: rounding mode 'sr:24'"), ("sr:x", "sr:x", "rounding: rounding mode 'sr:x'"),
        ("sr:", "sr:", "rounding: rounding mode 'sr:'"), ("upper", "RNE", "rounding: unknown rounding mode 'RNE'; did you mean 'rne'")]:
    case(f"cast rounding={name}", lambda s, v=value: rs.cast(F32, "e4m3", rounding=v), ValueError, pattern)
case("cast rounding=int", lambda s: rs.cast(F32, "e4m3", rounding=3), TypeError, "rounding: expected a rounding mode")
for name, kw, error, pattern in [
        ("convention", {"convention": "cud"}, ValueError, "convention: unknown convention 'cud'; did you mean 'cuda'"),
        ("convention int", {"convention": 3}, TypeError, "convention: expected"),
        ("seed -1", {"seed": -1}, ValueError, "seed: must be an integer from 0 to 2^64 - 1"),
        ("seed 2^64", {"seed": 2**64}, ValueError, "seed: must be"), ("seed float", {"seed": 1.5}, ValueError, "seed: must be"),
        ("seed str", {"seed": "1"}, ValueError, "seed: must be"), ("seed bool", {"seed": True}, ValueError, "seed: must be"),
        ("threads -1", {"threads": -1}, ValueError, "threads: must be an integer from 0"),
        ("threads 1025", {"threads": 1025}, ValueError, "threads: must be"), ("threads float", {"threads": 2.0}, ValueError, "threads: must be"),
        ("threads bool", {"threads": True}, ValueError, "threads: must be"),
        ("scale nan", {"scale": NAN}, ValueError, "scale must be finite"), ("scale inf", {"scale": INF}, ValueError, "scale must be finite"),
        ("scale str", {"scale": "2"}, TypeError, "scale: expected a real number"),
        ("scale none", {"scale": None}, TypeError, "scale: expected a real number"),
        ("scale bool", {"scale": True}, TypeError, "scale: expected a real number"),
        ("dtype unknown", {"dtype": "e4m4"}, ValueError, "x: unknown format 'e4m4'"),
        ("dtype size", {"dtype": "f16"}, TypeError, "x: f32 elements are not f16 bit patterns"),
        ("saturate str", {"saturate": "yes"}, TypeError, "saturate: expected True, False or None")]:
    case(f"cast {name}", lambda s, kw=kw: rs.cast(F32, "e4m3", **kw), error, pattern)
for name, x, error, pattern in [
        ("complex", np.ones(3, np.complex64), TypeError, "x: numpy dtype complex64 has no roundscope format"),
        ("object", np.array([object()]), TypeError, "x: numpy dtype object"),
        ("strings", np.array(["a", "b"]), TypeError, "x: numpy dtype <U1"),
        ("dict", {"a": 1}, TypeError, "x: numpy dtype object"), ("none", None, TypeError, "x: numpy dtype object"),
        ("ragged", [[1.0], [1.0, 2.0]], ValueError, ""), ("datetime", np.array(["2020-01-01"], "datetime64[D]"), TypeError, "x: numpy dtype"),
        ("meta tensor", torch.ones(2, device="meta"), TypeError, "x: a tensor on the meta device"),
        ("complex tensor", torch.ones(2, dtype=torch.complex64), TypeError, "x: torch dtype torch.complex64")]:
    case(f"cast x={name}", lambda s, x=x: rs.cast(x, "bf16"), error, pattern)
for name, out, error, pattern in [
        ("wrong dtype", np.empty(64, np.float16), TypeError, "out: a float16 array cannot hold e4m3"),
        ("wrong size", np.empty(63, ml_dtypes.float8_e4m3fn), ValueError, "tensor 'x': the output holds 63 bytes"),
        ("strided", np.empty(128, ml_dtypes.float8_e4m3fn)[::2], TypeError, "out: expected a C-contiguous, writable"),
        ("read-only", np.frombuffer(bytes(64), ml_dtypes.float8_e4m3fn), TypeError, "out: expected a C-contiguous, writable"),
        ("list", [0] * 64, TypeError, "out: expected"), ("tensor", torch.empty(64, dtype=torch.float8_e4m3fn), TypeError, "out: expected")]:
    case(f"cast out={name}", lambda s, out=out: rs.cast(F32, "e4m3", out=out), error, pattern)
case("cast out aliases x", lambda s: (lambda b: rs.cast(b[:32].view(np.float32), "bf16", out=b[16:32].view(ml_dtypes.bfloat16)))(
    np.zeros(256, np.uint8)), ValueError, "out: shares memory with x")
case("cast out is x", lambda s: (lambda a: rs.cast(a, "f32", out=a))(F32.copy()), ValueError, "out: shares memory with x")

# -- decode -------------------------------------------------------------------------------------
for name, kw, error, pattern in [
        ("format", {"format": "e4m4"}, ValueError, "x: unknown format 'e4m4'"),
        ("format size", {"format": "f16"}, TypeError, "x: f32 elements are not f16"),
        ("dtype int", {"dtype": np.int8}, TypeError, "dtype: decode gives float64 or float32"),
        ("dtype bad", {"dtype": "nonsense"}, TypeError, ""), ("threads", {"threads": -3}, ValueError, "threads: must be")]:
    case(f"decode {name}", lambda s, kw=kw: rs.decode(F32, **kw), error, pattern)

# -- read, read_metadata, write -----------------------------------------------------------------
for name, file, error, pattern in [
        ("missing", "missing.safetensors", OSError, "{s}/missing.safetensors: cannot open"),
        ("folder", "folder.safetensors", ValueError, "{s}/folder.safetensors: not a regular file"),
        ("fifo", "fifo.safetensors", ValueError, "{s}/fifo.safetensors: not a regular file"),
        ("symlink loop", "loop.safetensors", OSError, "{s}/loop.safetensors: cannot open"),
        ("truncated", "truncated.safetensors", ValueError, "{s}/truncated.safetensors"),
        ("empty", "empty.safetensors", ValueError, "{s}/empty.safetensors"),
        ("garbage", "garbage.safetensors", ValueError, "{s}/garbage.safetensors"),
        ("huge header", "huge_header.safetensors", ValueError, "{s}/huge_header.safetensors"),
        ("extension", "x.txt", ValueError, "{s}/x.txt")]:
    case(f"read {name}", lambda s, f=file: rs.read(s / f), error, pattern)
    case(f"read_metadata {name}", lambda s, f=file: rs.read_metadata(s / f), error, pattern)
    case(f"read mmap {name}", lambda s, f=file: rs.read(s / f, mmap=True), error, pattern)
case("read dtype", lambda s: rs.read(s / "x.safetensors", dtype="e4m4"), ValueError, "dtype")
case("read path int", lambda s: rs.read(3), TypeError, "")
for name, call, error, pattern in [
        ("missing folder", lambda s: rs.write(s / "no" / "y.safetensors", {"x": F32}), OSError, "{s}/no/y.safetensors"),
        ("onto a folder", lambda s: rs.write(s / "folder.safetensors", {"x": F32}), ValueError,
         "{s}/folder.safetensors: exists and is not a regular file"),
        ("onto a fifo", lambda s: rs.write(s / "fifo.safetensors", {"x": F32}), ValueError,
         "{s}/fifo.safetensors: exists and is not a regular file"),
        ("not a mapping", lambda s: rs.write(s / "y.safetensors", [F32]), TypeError, "tensors: expected a path or a mapping"),
        ("object array", lambda s: rs.write(s / "y.safetensors", {"x": np.array([object()])}), TypeError, "tensors['x']: numpy dtype object"),
        ("two in npy", lambda s: rs.write(s / "y.npy", {"a": F32, "b": F32}), ValueError, "{s}/y.npy"),
        ("extension", lambda s: rs.write(s / "y.bin", {"x": F32}), ValueError, "{s}/y.bin"),
        ("metadata value", lambda s: rs.write(s / "y.safetensors", {"x": F32}, {"a": 3}), TypeError,
         "metadata['a']: expected a string"),
        ("metadata list", lambda s: rs.write(s / "y.safetensors", {"x": F32}, [("a", "b")]), TypeError, "metadata: expected"),
        ("no tensors", lambda s: rs.write(s / "y.npy", {}), ValueError, "{s}/y.npy")]:
    case(f"write {name}", call, error, pattern)

# -- attention, truth, mma ----------------------------------------------------------------------
QKV = {n: Q.copy() for n in ("q", "k", "v")}
for name, change, kw, error, pattern in [
        ("recipe", {}, {"recipe": "fa3-fp9"}, ValueError, "recipe: unknown recipe 'fa3-fp9'; did you mean 'fa3-fp8'"),
        ("recipe int", {}, {"recipe": 3}, TypeError, "recipe: expected a string, not int"),
        ("settings key", {}, {"settings": {"p_scal": 2}}, ValueError, "settings: unknown recipe key 'p_scal'; did you mean 'p_scale'"),
        ("settings value", {}, {"settings": {"p_scale": "big"}}, ValueError, "settings"),
        ("settings list", {}, {"settings": ["p_scale=2"]}, TypeError, "settings: expected a mapping"),
        ("softmax_scale nan", {}, {"softmax_scale": NAN}, ValueError, "softmax_scale"),
        ("softmax_scale inf", {}, {"softmax_scale": INF}, ValueError, "softmax_scale"),
        ("softmax_scale zero", {}, {"softmax_scale": 0.0}, ValueError, "softmax_scale"),
        ("softmax_scale bool", {}, {"softmax_scale": True}, TypeError, "softmax_scale: expected a number"),
        ("backward without do", {}, {"backward": True}, ValueError, "inputs: the backward pass needs a tensor 'do'"),
        ("threads", {}, {"threads": -1}, ValueError, "threads: must be"),
        ("v shape", {"v": Q[:, :31]}, {}, ValueError, "v: has shape"),
        ("k head dim", {"k": Q[..., :8]}, {}, ValueError, "k: "),
        ("nan k", {"k": np.where(np.arange(16) == 3, np.nan, Q)}, {}, ValueError, "k: "),
        ("inf q", {"q": np.where(np.arange(16) == 3, np.inf, Q)}, {}, ValueError, "q: "),
        ("empty", {"q": Q[:, :0], "k": Q[:, :0], "v": Q[:, :0]}, {}, ValueError, "q: "),
        ("complex q", {"q": Q.astype(np.complex64)}, {}, TypeError, "q: numpy dtype complex64"),
        ("five dims", {n: Q[None, None] for n in "qkv"}, {}, ValueError, "q: "),
        ("do shape", {}, {"backward": True, "do": Q[:, :5]}, ValueError, "do: ")]:
    case(f"attention {name}", lambda s, c=change, kw=kw: rs.attention(**{**QKV, **c}, **kw), error, pattern)
for name, kw, error, pattern in [
        ("bits 0", {"bits": 0}, ValueError, "bits"), ("bits huge", {"bits": 10**9}, ValueError, "bits"),
        ("bias shape", {"bias": Q}, ValueError, "bias"),
        ("bias nan", {"bias": np.full((2, 32, 32), np.nan, np.float32)}, ValueError, "bias: holds NaN"),
        ("softmax_scale", {"softmax_scale": -INF}, ValueError, "softmax_scale"), ("threads", {"threads": 2000}, ValueError, "threads")]:
    case(f"truth {name}", lambda s, kw=kw: rs.truth(Q, Q, Q, **kw), error, pattern)
# The attention problem's arguments, to attention and truth alike.
for name, kw, error, pattern in [
        ("mask nan", {"attn_mask": np.full((32, 32), np.nan, np.float32)}, ValueError, "attn_mask: holds NaN"),
        ("mask +inf", {"attn_mask": np.full((32, 32), np.inf, np.float32)}, ValueError, "attn_mask: holds +Inf"),
        ("mask shape", {"attn_mask": np.zeros((32, 31), np.float32)}, ValueError, "attn_mask: has shape [32, 31]"),
        ("mask five dims", {"attn_mask": np.zeros((1, 1, 1, 32, 32), np.float32)}, ValueError, "attn_mask: has shape"),
        ("bool mask shape", {"attn_mask": np.ones((3, 32), bool)}, ValueError, "attn_mask: has shape [3, 32]"),
        ("mask int", {"attn_mask": np.zeros((32, 32), np.int32)}, ValueError, "attn_mask: has dtype i32"),
        ("mask complex", {"attn_mask": np.zeros((32, 32), np.complex64)}, TypeError, "attn_mask: numpy dtype complex64"),
        ("alignment", {"causal": True, "causal_alignment": "sideways"}, ValueError,
         "causal_alignment: 'sideways' is not one of bottom-right|top-left"),
        ("alignment int", {"causal_alignment": 3}, TypeError, "causal_alignment: expected a string, not int"),
        ("window_left -2", {"window_left": -2}, ValueError, "window_left: must be an integer from -1"),
        ("window_left 1.5", {"window_left": 1.5}, ValueError, "window_left: must be an integer, not '1.5'"),
        ("window_left bool", {"window_left": True}, TypeError, "window_left: expected a number"),
        ("window_left text", {"window_left": "x"}, TypeError, "window_left: expected an integer, not str"),
        ("window_right 2^70", {"window_right": 2**70}, ValueError, "window_right: must be an integer"),
        ("softcap nan", {"softcap": NAN}, ValueError, "softcap: must be a finite number"),
        ("softcap -1", {"softcap": -1.0}, ValueError, "softcap: must be a finite number"),
        ("softcap inf", {"softcap": INF}, ValueError, "softcap: must be a finite number"),
        ("softcap text", {"softcap": "x"}, TypeError, "softcap: expected a number, not str"),
        ("softcap bool", {"softcap": True}, TypeError, "softcap: expected a number"),
        ("k heads", {"k": _K3, "v": _K3}, ValueError, "k: has shape [3, 32, 16]: its 3 heads do not divide q's 2")]:
    qkv = {"q": Q, "k": kw.pop("k", Q), "v": kw.pop("v", Q)}
    case(f"attention {name}", lambda s, kw=kw, qkv=qkv: rs.attention(**qkv, **kw), error, pattern)
    case(f"truth {name}", lambda s, kw=kw, qkv=qkv: rs.truth(**qkv, **kw), error, pattern)
A16 = RNG.standard_normal((16, 16)).astype(np.float16)
for name, call, error, pattern in [
        ("arch", lambda s: rs.mma(A16, A16, arch="sm91"), ValueError, "arch: unknown architecture 'sm91'"),
        ("instruction", lambda s: rs.mma(A16, A16, instruction="mma.snyc"), ValueError,
         "instruction: unknown instruction 'mma.snyc'; did you mean 'mma.sync'"),
        ("shapes", lambda s: rs.mma(A16, A16[:8]), ValueError, ""),
        ("dtypes", lambda s: rs.mma(A16, A16.astype(np.float32)), ValueError, ""),
        ("int", lambda s: rs.mma(A16.astype(np.int64), A16.astype(np.int64)), ValueError, ""),
        ("c shape", lambda s: rs.mma(A16, A16, np.zeros((3, 3), np.float32)), ValueError, "")]:
    case(f"mma {name}", call, error, pattern)

# -- the analyses -------------------------------------------------------------------------------
ANALYSES = {"pcollapse": rs.pcollapse, "leak": rs.leak, "headroom": rs.headroom, "bias": rs.bias}
for analysis, function in ANALYSES.items():
    for name, kw, error, pattern in [
            ("n 0", {"n": 0}, ValueError, "n: "), ("n -1", {"n": -1}, ValueError, "n: "),
            ("n bool", {"n": True}, TypeError, "n: expected a number"), ("n float", {"n": 1.5}, ValueError, "n: "),
            ("n huge", {"n": 2**40}, ValueError, "n: "), ("d 0", {"d": 0}, ValueError, "d: "),
            ("seed -1", {"seed": -1}, ValueError, "seed: "), ("softmax_scale nan", {"softmax_scale": NAN}, ValueError, "softmax_scale"),
            ("threads", {"threads": -1}, ValueError, "threads: must be")]:
        case(f"{analysis} synthetic {name}", lambda s, f=function, kw=kw: f(synthetic=True, **kw), error, pattern)
    for name, inputs, error, pattern in [
            ("missing file", "missing.safetensors", OSError, "{s}/missing.safetensors"),
            ("fifo", "fifo.safetensors", ValueError, "{s}/fifo.safetensors"),
            ("truncated", "truncated.safetensors", ValueError, "{s}/truncated.safetensors"),
            ("nan k", "nan_k.safetensors", ValueError, "{s}/nan_k.safetensors"),
            ("no v", "no_v.safetensors", ValueError, "{s}/no_v.safetensors"),
            ("bad metadata", "bad_meta.safetensors", ValueError, "{s}/bad_meta.safetensors")]:
        case(f"{analysis} {name}", lambda s, f=function, i=inputs: f(s / i), error, pattern)
    case(f"{analysis} inputs int", lambda s, f=function: f(3), TypeError, "inputs: expected a path or a mapping")
    case(f"{analysis} inputs no k", lambda s, f=function: f({"q": Q, "v": Q}), ValueError, "inputs")
for analysis, function in {**ANALYSES, "attribute": lambda x: rs.attribute(x, recipe="fa2-bf16")}.items():
    for name, mask, pattern in [("nan", np.full((32, 32), np.nan, np.float32), "attn_mask: holds NaN"),
                                ("shape", np.zeros((32, 31), np.float32), "attn_mask: has shape [32, 31]"),
                                ("int", np.zeros((32, 32), np.int32), "attn_mask: has dtype i32")]:
        case(f"{analysis} inputs with a mask {name}", lambda s, f=function, m=mask: f(
            {"q": Q, "k": Q, "v": Q, "do": Q, "attn_mask": m}), ValueError, pattern)
for name in PROBLEM_FILES:  # every consumer of a file refuses what it cannot take, naming the file
    for consumer, call in {**ANALYSES, "attribute": lambda p: rs.attribute(p, recipe="fa2-bf16"),
                           "compare": lambda p: rs.compare(p, "fa2-bf16")}.items():
        case(f"{consumer} {name}", lambda s, c=call, n=name: c(s / n), ValueError, "{s}/" + name + ": ")
for name, call, error, pattern in [
        ("k_sink 0", lambda s: rs.pcollapse(k_sink=0), ValueError, "k_sink: must be an integer from 1"),
        ("k_sink all", lambda s: rs.pcollapse(n=64, d=16, k_sink=64), ValueError, "k_sink: 64 sink tokens"),
        ("sink_strength nan", lambda s: rs.pcollapse(sink_strength=NAN), ValueError, "sink_strength"),
        ("scale empty", lambda s: rs.pcollapse(scale=[]), ValueError, "scale: no static scale given"),
        ("scale nan", lambda s: rs.pcollapse(scale=[NAN]), ValueError, "scale"),
        ("scale zero", lambda s: rs.pcollapse(scale=[0.0]), ValueError, "scale"),
        ("order", lambda s: rs.pcollapse(order="sideways"), ValueError, "order: 'sideways' is not one of forward|reverse|both"),
        ("recipe", lambda s: rs.pcollapse(recipe="fa3-fp9"), ValueError, "recipe: unknown recipe"),
        ("leak format", lambda s: rs.leak(synthetic=True, format="mxfp5"), ValueError, "format: unknown block format 'mxfp5'; did you mean"),
        ("leak block 0", lambda s: rs.leak(synthetic=True, block=0), ValueError, "block"),
        ("leak max_tokens 0", lambda s: rs.leak(synthetic=True, max_tokens=0), ValueError, "max_tokens"),
        ("headroom scenario", lambda s: rs.headroom(synthetic=True, scenario="snk"), ValueError, "scenario: 'snk' is not one of"),
        ("bias steps 0", lambda s: rs.bias(synthetic=True, steps=0), ValueError, "steps"),
        ("bias heads 0", lambda s: rs.bias(synthetic=True, heads=0), ValueError, "heads"),
        ("bias list with a missing file", lambda s: rs.bias([s / "x.safetensors", s / "missing.safetensors"]), OSError, "{s}/missing.safetensors"),
        ("attribute recipe", lambda s: rs.attribute(synthetic=True, recipe="nope"), ValueError, "recipe: unknown recipe 'nope'"),
        ("attribute scenario", lambda s: rs.attribute(synthetic=True, recipe="fa2-bf16", scenario="x"), ValueError, "scenario"),
        ("compare recipe", lambda s: rs.compare(s / "dump.safetensors", "fa9"), ValueError, "recipe: unknown recipe 'fa9'"),
        ("compare no outputs", lambda s: rs.compare(s / "x.safetensors", "fa2-bf16"), ValueError, "{s}/x.safetensors holds nothing a kernel wrote"),
        ("compare missing", lambda s: rs.compare(s / "missing.safetensors", "fa2-bf16"), OSError, "{s}/missing.safetensors"),
        ("check missing dir", lambda s: rs.check(s / "nothing"), OSError, "{s}/nothing: no such folder"),
        ("check a file", lambda s: rs.check(s / "x.safetensors"), ValueError, "{s}/x.safetensors: not a directory"),
        ("check junit onto an input", lambda s: rs.check(s / "dumps", junit=s / "dumps" / "a.safetensors"), ValueError, "junit"),
        ("report missing dir", lambda s: rs.report(s / "nothing", s / "out"), OSError, "{s}/nothing: no such folder"),
        ("report shard", lambda s: rs.report(s / "dumps", s / "out", shard="3/2"), ValueError, "shard"),
        ("report shard text", lambda s: rs.report(s / "dumps", s / "out", shard="a/b"), ValueError, "shard"),
        ("report k_sink", lambda s: rs.report(s / "dumps", s / "out", k_sink=0), ValueError, "k_sink"),
        ("report recipe", lambda s: rs.report(s / "dumps", s / "out", recipe=["fa9"]), ValueError, "recipe: unknown recipe"),
        ("report duplicate layer and step", lambda s: rs.report(s / "dumps", s / "out", html=False), ValueError, "{s}/dumps/a.safetensors and {s}/dumps/b.safetensors are both layer 0 at step 1"),
        ("report negative micro_batch", lambda s: rs.list_tasks(s / "micro", s / "out"), ValueError, "{s}/micro/negative.safetensors: metadata \"micro_batch\" is -2"),
        ("run_task unknown", lambda s: rs.run_task(s / "dumps", "nonsense"), ValueError, "")]:
    case(name, call, error, pattern)

# -- mx -----------------------------------------------------------------------------------------
X2 = F32.reshape(2, 32)
for name, kw, error, pattern in [
        ("format", {"format": "mxfp5"}, ValueError, "format: unknown block format 'mxfp5'; did you mean"),
        ("block 0", {"format": "mxfp4", "block": 0}, ValueError, "block"), ("block -3", {"format": "mxfp4", "block": -3}, ValueError, "block"),
        ("axis", {"format": "mxfp4", "axis": 5}, ValueError, "tensor 'x': axis 5 is outside shape [2, 32]"), ("offset", {"format": "mxfp4", "offset": -1}, ValueError, "offset"),
        ("scale_rule", {"format": "mxfp4", "scale_rule": "round"}, ValueError, "scale_rule: unknown scale rule 'round'"),
        ("scale_rule misspelt", {"format": "mxfp4", "scale_rule": "rciel"}, ValueError, "scale_rule: unknown scale rule 'rciel'; did you mean 'rceil'"),
        ("rounding", {"format": "mxfp4", "rounding": "nearst"}, ValueError, "rounding: unknown rounding mode 'nearst'; did you mean 'rne'"),
        ("seed", {"format": "mxfp4", "seed": -1}, ValueError, "seed")]:
    case(f"mx.quantize {name}", lambda s, kw=kw: rs.mx.quantize(X2, **kw), error, pattern)
case("mx.quantize nan", lambda s: rs.mx.quantize(np.full((2, 32), np.nan, np.float32), "mxfp4"), None, "")
case("mx.dequantize format", lambda s: rs.mx.dequantize(quantized_with(format="mxfp5")), ValueError,
     "format: unknown block format 'mxfp5'")
case("mx.dequantize block", lambda s: rs.mx.dequantize(quantized_with(block=7)), ValueError, "")
case("mx.dequantize scales", lambda s: rs.mx.dequantize(quantized_with(scales=np.zeros(3, ml_dtypes.float8_e8m0fnu))), ValueError, "")
case("mx.compare_rules format", lambda s: rs.mx.compare_rules(X2, "nvfp5"), ValueError, "format: unknown block format")

# -- torch, emulate, plot, dump -----------------------------------------------------------------
for name, call, error, pattern in [
        ("to_torch complex", lambda s: rs.to_torch(np.ones(2, np.complex64)), TypeError, "a: numpy dtype complex64"),
        ("to_torch object", lambda s: rs.to_torch(np.array([object()])), TypeError, "a: numpy dtype object"),
        ("to_numpy meta", lambda s: rs.to_numpy(torch.ones(2, device="meta")), TypeError, "t: a tensor on the meta device"),
        ("to_numpy complex", lambda s: rs.to_numpy(torch.ones(2, dtype=torch.complex64)), TypeError, "t: torch dtype torch.complex64"),
        ("emulate recipe", lambda s: rst.emulate("fa3-fp9"), ValueError, "recipe: unknown recipe 'fa3-fp9'; did you mean 'fa3-fp8'"),
        ("emulate settings", lambda s: rst.emulate("fa3-fp8", settings={"p_scal": 1}), ValueError, "settings: unknown recipe key"),
        ("emulate settings list", lambda s: rst.emulate("fa3-fp8", settings=[1]), TypeError, "settings: expected a mapping"),
        ("emulate fallback", lambda s: rst.emulate("fa3-fp8", fallback="exac"), ValueError, "fallback: 'exac' is not one of"),
        ("emulate fallback none", lambda s: rst.emulate("fa3-fp8", fallback=None), ValueError, "fallback: None is not one of"),
        ("emulate threads", lambda s: rst.emulate("fa3-fp8", threads=-1), ValueError, "threads: must be an integer from 0"),
        ("mx.quantize 0-d", lambda s: rs.mx.quantize(np.array(3.0, np.float32), "mxfp8_e4m3"), ValueError, "tensor 'x': a scalar has no axis"),
        ("emulate threads bool", lambda s: rst.emulate("fa3-fp8", threads=True), ValueError, "threads: must be an integer"),
        ("plot format", lambda s: roundscope.plot.plot("headroom", {}, s / "p.jpg"), ValueError, "path: '"),
        ("sdpa learned mask", lambda s: rst.scaled_dot_product_attention(*(torch.ones(1, 4, 8) for _ in range(3)), attn_mask=torch.ones(4, 4, requires_grad=True)), ValueError, "attn_mask: a mask that needs a gradient"),
        ("sdpa mask shape", lambda s: rst.scaled_dot_product_attention(*(torch.ones(1, 4, 8) for _ in range(3)), attn_mask=torch.ones(4, 3)), ValueError, "attn_mask: has shape [4, 3]"),
        ("sdpa mask nan", lambda s: rst.scaled_dot_product_attention(*(torch.ones(1, 4, 8) for _ in range(3)), attn_mask=torch.full((4, 4), float("nan"))), ValueError, "attn_mask: holds NaN"),
        ("sdpa dropout", lambda s: rst.scaled_dot_product_attention(*(torch.ones(1, 4, 8) for _ in range(3)), dropout_p=0.5), ValueError, "dropout_p: "),
        ("sdpa gqa", lambda s: rst.scaled_dot_product_attention(torch.ones(3, 4, 8), torch.ones(2, 4, 8), torch.ones(2, 4, 8), enable_gqa=True), ValueError, "enable_gqa: 3 query heads"),
        ("sdpa heads without gqa", lambda s: rst.scaled_dot_product_attention(torch.ones(4, 4, 8), torch.ones(2, 4, 8), torch.ones(2, 4, 8)), ValueError, "enable_gqa: 4 query heads against 2 key heads need enable_gqa=True"),
        ("sdpa six dims", lambda s: rst.scaled_dot_product_attention(*(torch.ones(1, 1, 1, 1, 4, 8) for _ in range(3))), ValueError, "query: 6 dimensions"),
        ("plot kind", lambda s: roundscope.plot.plot("pcolapse", {}, s / "p.png"), ValueError, "kind: 'pcolapse' is not one of"),
        ("plot result", lambda s: roundscope.plot.plot("headroom", {"rows": 3}, s / "p.png"), ValueError, "result: not a headroom result"),
        ("plot result type", lambda s: roundscope.plot.plot("headroom", None, s / "p.png"), TypeError, "result: expected"),
        ("plot folder", lambda s: roundscope.plot.plot("headroom", {}, s / "no" / "p.png"), FileNotFoundError, "path: no folder"),
        ("dump settings without recipe", lambda s: AttentionDump(s / "d", settings={"p_scale": 2}), ValueError, "settings: recipe settings need the recipe"),
        ("dump micro_batch", lambda s: AttentionDump(s / "d").step(0, micro_batch=-1).__enter__(), ValueError, "micro_batch: must be an integer from 0"),
        ("dump micro_batch bool", lambda s: AttentionDump(s / "d").step(0, micro_batch=True).__enter__(), ValueError, "micro_batch: ")]:
    case(name, call, error, pattern)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return make_scratch(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("call, error, pattern", CASES)
def test_hostile_input(scratch, capfd, call, error, pattern):
    before = digest(scratch)
    if error is None:  # accepted: it must give a result, not a crash or an exception
        call(scratch)
    else:
        with pytest.raises(error) as e:
            call(scratch)
        message = str(e.value)
        assert "\n" not in message.strip() and "--" not in message, message
        assert message.startswith(pattern.replace("{s}", str(scratch))), message
    assert digest(scratch) == before  # nothing written, changed or left behind
    out, err = capfd.readouterr()
    assert out == "", out


def test_the_suite_holds_400_cases():
    assert len(CASES) >= 400, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)


def test_a_0d_array_keeps_its_shape(tmp_path):
    """A 0-d array (numpy or torch) is written and read back as 0-d, and cast as 0-d (it came back
    as shape (1,))."""
    import torch
    rs.write(tmp_path / "s.safetensors", {"x": np.array(3.0, np.float32), "t": torch.tensor(2.0)})
    back = rs.read(tmp_path / "s.safetensors")
    assert back["x"].shape == () and back["t"].shape == () and float(back["x"]) == 3.0
    assert rs.cast(np.array(1.5, np.float32), "bf16").shape == ()
