"""roundscope: what low-precision arithmetic does inside attention, bit for bit.

Every function calls roundscope's C++ core; none re-implements any numerics. Functions that
mirror a command (mma, attention, truth, the analyses, mx) run that command in this process,
with the same checks, messages and bits as `roundscope COMMAND ... --json` (docs/cli.md), and
take arrays (numpy, torch tensors, ml_dtypes types) where the command takes files. Errors
are ValueError, TypeError or OSError (MemoryError where memory runs out) carrying the command's
one-line message, naming the Python argument where the command names a flag.
"""
from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, cast as _cast

import numpy as np

from . import _arrays, _core, results
from ._arrays import to_numpy, to_torch

__version__: str = str(getattr(_core, "__version__"))  # the version of the build the package runs
from ._report import list_tasks, load_report, report, run_task
from . import mx  # noqa: F401  (roundscope.mx)

__all__ = [
    "formats", "recipes", "cast", "decode", "read", "write", "mma", "attention", "truth",
    "pcollapse", "leak", "headroom", "bias", "attribute", "compare", "check", "report", "load_report", "list_tasks",
    "run_task", "mx", "to_torch", "to_numpy", "results",
]

Arrays = Mapping[str, object]
# An array argument: a numpy array, a torch tensor (any device), or what numpy.asarray takes.
ArrayLike = Any
# An array result: a numpy array, or a torch tensor on the input's device where the input is one.
Array = Any
# A file argument.
Path = str | os.PathLike[str]


def formats() -> dict[str, Any]:
    """Every number format with its parameters: `roundscope formats --json`."""
    return _cast(dict[str, Any], _core.formats())


def recipes() -> dict[str, Any]:
    """Every attention recipe preset and setting key: `roundscope recipes --json`."""
    return _cast(dict[str, Any], _core.recipes())


def _seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed: must be an integer from 0 to 2^64 - 1, not {seed!r}")
    return int(seed)


def _threads(threads: object) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 0 <= int(threads) <= 1024:
        raise ValueError(f"threads: must be an integer from 0 (all cores) to 1024, not {threads!r}")
    return int(threads)


def cast(x: ArrayLike, to: object, rounding: str | None = None, saturate: bool | None = None, convention: str = "cuda",
         flush_input: bool = False, flush_output: bool = False, seed: int = 0, scale: float = 1.0,
         threads: int = 0, dtype: str | None = None, out: np.ndarray | None = None) -> Array:
    """Rounds every element of `x` once into the format `to` (`roundscope cast`): a format name or
    alias in any case ("e4m3", "E4M3", "float8_e4m3fn", "fp16") or a dtype of numpy, ml_dtypes
    or torch (np.float16, ml_dtypes.float8_e4m3fn, torch.bfloat16).

    rounding: rne (default), rna, rtz, up, down, odd, sr, sr:N. saturate: None keeps the
    convention's choice (cuda, ocp, ml_dtypes, torch). scale multiplies before the one rounding.
    `dtype` reads `x` as raw bit patterns of that format. Returns a numpy array of the ml_dtypes
    type of `to` (bfloat16, float8_e4m3fn, ...), or uint8 bit patterns where ml_dtypes has none
    (ue4m3, int8); a torch tensor of torch's type (uint8 bit patterns where torch has none) on
    x's device where x is a torch tensor. Element i uses random stream i, so stochastic results
    do not depend on threads.
    out: a numpy, C-contiguous, writable array of x's size in that type (or its bit patterns), written in
    place and returned: repeated casts then allocate nothing. It may not share memory with x.
    """
    to = _format_name(to, "to")
    _check_cast_options(rounding, convention, saturate, scale)
    if convention == "torch":
        _check_torch_convention()
    if out is None and dtype is None:
        # A plain numpy array with arguments of the plain types: one call, numpy's C API (a torch
        # tensor through its numpy view, on the CPU without a copy).
        torch_in = type(x) is not np.ndarray and _arrays.is_torch_tensor(x)
        y = _core.cast_numpy(_arrays.to_numpy(x, "x") if torch_in else x, to, rounding, saturate, convention,
                             flush_input, flush_output, seed, scale, threads)
        if y is not None:
            return _arrays.like(x, y) if torch_in else y
    if type(seed) is not int or not 0 <= seed < 2**64:
        seed = _seed(seed)
    if type(threads) is not int or not 0 <= threads <= 1024:
        threads = _threads(threads)
    rounding = rounding or ""
    if out is not None:
        data, name, shape = _arrays.raw(x, "x", dtype)
        if type(out) is not np.ndarray or not out.flags.c_contiguous or not out.flags.writeable:
            raise TypeError("out: expected a C-contiguous, writable numpy array")
        fmt = to
        typed = _arrays.NUMPY.get(fmt)
        if out.dtype != typed and not (out.dtype.kind == "u" and out.dtype.itemsize == _arrays.STORAGE_BYTES[fmt]):
            raise TypeError(f"out: a {out.dtype} array cannot hold {fmt} (expected {typed or 'uint8 bit patterns'})")
        if np.may_share_memory(np.asarray(data), out):
            # The cast reads x while it writes out, in chunks on several threads: an overlap
            # would read values already overwritten.
            raise ValueError("out: shares memory with x; pass an array of its own")
        _core.cast_into(data, name, shape, out.reshape(-1).view(np.uint8), to, rounding, convention, saturate,
                        bool(flush_input), bool(flush_output), seed, float(scale), threads)
        return out
    data, name, shape = _arrays.raw(x, "x", dtype)
    bits, fmt = _core.cast(data, name, shape, to, rounding, convention, saturate, bool(flush_input),
                           bool(flush_output), seed, float(scale), threads)
    return _arrays.like(x, _arrays.typed(bits, fmt))


def _check_cast_options(rounding: object, convention: object, saturate: object, scale: object) -> None:
    """TypeErrors naming the argument, before the core's binding sees a value of the wrong type."""
    if rounding is not None and not isinstance(rounding, str):
        raise TypeError(f"rounding: expected a rounding mode's name (rne, rna, ...), not {type(rounding).__name__}")
    if not isinstance(convention, str):
        raise TypeError(f"convention: expected a convention's name (cuda, ocp, ...), not {type(convention).__name__}")
    if saturate is not None and not isinstance(saturate, (bool, np.bool_)):
        raise TypeError(f"saturate: expected True, False or None, not {type(saturate).__name__}")
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale: expected a real number, not {type(scale).__name__}")


# The torch release the `torch` convention was measured against, over all float32 inputs
# (tests/peer/test_torch_exhaustive.py).
TORCH_CONVENTION_CHECKED = "2.15"


@functools.lru_cache(maxsize=1)
def _check_torch_convention() -> None:
    """Warns, once, where the installed torch is not the release the convention was checked with."""
    try:
        import torch
    except ImportError:
        return
    version = str(torch.__version__)
    if not version.startswith(TORCH_CONVENTION_CHECKED + "."):
        warnings.warn(f"convention='torch' reproduces torch {TORCH_CONVENTION_CHECKED}'s casts (checked on every "
                      f"float32); the installed torch {version} was not checked and may differ", stacklevel=3)


# Spellings of formats that neither roundscope nor ml_dtypes use as names, and that people write.
_SPELLINGS = {"fp16": "f16", "half": "f16", "float16": "f16", "fp32": "f32", "float": "f32", "float32": "f32",
              "fp64": "f64", "double": "f64", "float64": "f64", "bfloat16": "bf16"}


@functools.lru_cache(maxsize=256)
def _format_name(to: object, argument: str = "to") -> str:
    """The format's own name for `to`: a name or alias in any case ("E4M3", "fp8_e4m3", "fp16"),
    or a dtype object of numpy, ml_dtypes or torch (np.float16, ml_dtypes.float8_e4m3fn,
    torch.bfloat16). A TypeError or ValueError naming `argument` otherwise."""
    if to is None:
        raise TypeError(f"{argument}: expected a format name or a numpy, ml_dtypes or torch dtype, not None")
    if isinstance(to, str):
        name = to
    elif str(to).startswith("torch."):
        name = str(to)[len("torch."):]
    else:
        try:
            name = np.dtype(_cast(Any, to)).name
        except TypeError:
            raise TypeError(f"{argument}: expected a format name or a numpy, ml_dtypes or torch dtype, "
                            f"not {type(to).__name__}") from None
    for candidate in dict.fromkeys((name, name.lower(), _SPELLINGS.get(name.lower()))):
        found = None if candidate is None else _core.find_format(candidate)
        if found is not None:
            return found
    return _core.format_name(name)  # the command line's error, with its suggestion


def decode(x: ArrayLike, format: str | None = None, dtype: object = np.float64, threads: int = 0) -> Array:
    """The values of `x` (an array of a roundscope format, or raw bit patterns of `format`),
    exactly as float64, or as float32 (dtype=np.float32: exact for formats of 16 bits or fewer);
    a torch tensor on x's device where x is one."""
    data, name, shape = _arrays.raw(x, "x", format)
    to_double = np.dtype(_cast(Any, dtype)) == np.float64
    if not to_double and np.dtype(_cast(Any, dtype)) != np.float32:
        raise TypeError(f"dtype: decode gives float64 or float32, not {dtype!r}")
    return _arrays.like(x, _core.decode(data, name, shape, to_double, _threads(threads)))


def read(path: Path, dtype: str | None = None, mmap: bool = False) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors or .npy file by name, as read-only arrays (.npy of an
    ml_dtypes type needs `dtype`). The metadata: read_metadata.

    The file is read into memory, so that a file truncated or changed while it is read raises
    OSError. mmap=True maps it instead (nothing is read until used, for files larger than
    memory): a page lost to a later truncation by another process then ends the interpreter,
    as it ends the command line, since no exception can be raised from inside numpy."""
    tensors, _ = _core.read(os.fsdecode(path), dtype, bool(mmap))
    return _cast(dict[str, np.ndarray], _arrays.tensors_out(tensors))


def read_metadata(path: Path) -> dict[str, str]:
    """The string metadata of a .safetensors file."""
    return _cast(dict[str, str], _core.read(os.fsdecode(path), None)[1])


def write(path: Path, tensors: Arrays, metadata: Mapping[str, str] | None = None) -> None:
    """Writes {name: array} to a .safetensors file (or one array to .npy), atomically."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata: expected a mapping of strings to strings, not {type(metadata).__name__}")
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"metadata[{key!r}]: expected a string key and value, not {type(value).__name__}")
    _core.write(os.fsdecode(path), _arrays.tensors_in(tensors, "tensors"), dict(metadata or {}))


def mma(a: ArrayLike, b: ArrayLike, c: ArrayLike = None, arch: str = "sm90", instruction: str | None = None,
        threads: int = 0) -> Array:
    """D = A B + C on a tensor core's model (`roundscope mma`): A [T,M,K] or [M,K], B [.., K, N],
    C [.., M, N] (None: zeros). The input dtypes pick the model with `arch` and `instruction`.
    D is a torch tensor on a's device where a is a torch tensor."""
    tensors = {"A": a, "B": b} if c is None else {"A": a, "B": b, "C": c}
    out, _ = _core.mma(_arrays.tensors_in(tensors, "inputs", by_name=True), arch=arch, instruction=instruction,
                       threads=_threads(threads))
    return _arrays.like(a, _arrays.tensors_out(out)["D"])


def _attention_inputs(q: ArrayLike, k: ArrayLike, v: ArrayLike, do: ArrayLike = None,
                      **more: ArrayLike) -> dict[str, Any]:
    tensors = {"q": q, "k": k, "v": v}
    if do is not None:
        tensors["do"] = do
    tensors.update({n: t for n, t in more.items() if t is not None})
    return tensors


def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, recipe: str = "fa2-bf16",
              settings: Mapping[str, object] | None = None, causal: bool = False,
              softmax_scale: float | None = None, backward: bool = False, do: ArrayLike = None, truth: bool = False,
              attn_mask: ArrayLike = None, causal_alignment: str | None = None, window_left: int | None = None,
              window_right: int | None = None, softcap: float | None = None, launch_heads: int | None = None,
              threads: int = 0) -> dict[str, Any]:
    """A recipe's flash attention, bit for bit as its kernel computes it (`roundscope attention`).

    q [.., Nq, D], k [.., Nk, D], v [.., Nk, Dv], with ".." nothing, [H] or [B, H]; k and v may
    have fewer heads (grouped-query attention: query head h reads key-value head h // (H / Hkv)).
    settings change the preset ({"p_scale": 256, ...}: `roundscope recipes`). attn_mask: a
    boolean (True takes part) or additive mask broadcast over [B, H, Nq, Nk] as PyTorch's
    scaled_dot_product_attention takes it; causal_alignment "top-left" (PyTorch's is_causal) or
    "bottom-right" (FlashAttention's, the default) where Nq != Nk; window_left, window_right:
    FlashAttention's window_size; launch_heads: B x H of the launch these heads are a part of
    (PyTorch's split-KV and split-key choices read the whole grid; None: q's own). Returns {"o",
    "lse"} and, with backward=True (needs do), "dq", "dk", "dv", "delta"; with truth=True also
    "errors": each output's max_abs, rms and rel_rms against the exact attention. Arrays come
    back as torch tensors on q's device where q is a torch tensor."""
    result, (out, _) = _core.attention(
        _arrays.tensors_in(_attention_inputs(q, k, v, do, attn_mask=attn_mask), "inputs", by_name=True),
        recipe=recipe, settings=settings, causal=bool(causal), softmax_scale=softmax_scale, backward=bool(backward),
        truth=bool(truth), causal_alignment=causal_alignment, window_left=window_left, window_right=window_right,
        softcap=softcap, launch_heads=launch_heads, threads=_threads(threads))
    tensors: dict[str, Any] = _arrays.like(q, _arrays.tensors_out(out))
    if truth:
        tensors["errors"] = result["errors"]
    return tensors


def truth(q: ArrayLike, k: ArrayLike, v: ArrayLike, do: ArrayLike = None, causal: bool = False,
          softmax_scale: float | None = None, backward: bool = False,
          intermediates: bool = False, bits: int = 256, reference: bool = False, bias: ArrayLike = None,
          attn_mask: ArrayLike = None,
          causal_alignment: str | None = None, window_left: int | None = None, window_right: int | None = None,
          softcap: float | None = None, threads: int = 0) -> dict[str, Array]:
    """Exact attention rounded once to float64 (`roundscope truth`): {"o", "lse"}, with backward
    "delta", "dq", "dk", "dv", with intermediates "s" and "p". attn_mask (or bias, its older
    name, additive only) and the mask's other arguments as attention() takes them; softcap:
    scores capped as softcap tanh(s / softcap) before the mask. k and v may have fewer heads
    (grouped-query attention: dk and dv are then the key-value heads'). Torch tensors on q's
    device where q is one."""
    _, (out, _) = _core.truth(
        _arrays.tensors_in(_attention_inputs(q, k, v, do, bias=bias, attn_mask=attn_mask), "inputs", by_name=True),
        causal=bool(causal), softmax_scale=softmax_scale, backward=bool(backward), intermediates=bool(intermediates),
        bits=bits, reference=bool(reference), causal_alignment=causal_alignment, window_left=window_left,
        window_right=window_right, softcap=softcap, threads=_threads(threads))
    return _cast(dict[str, Array], _arrays.like(q, _arrays.tensors_out(out)))


def _analysis_inputs(inputs: object) -> object:
    """An analysis's inputs as the core takes them: a path as a string, a mapping of arrays as
    {name: (bytes, dtype, shape)}, several inputs (bias's steps) as a list of those, None as is."""
    if inputs is None or _arrays.is_path(inputs):
        return None if inputs is None else os.fsdecode(_cast(Any, inputs))
    if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        return [_analysis_inputs(x) for x in inputs]
    return _arrays.tensors_in(_cast(Mapping[str, Any], inputs), "inputs")


def pcollapse(inputs: Path | Arrays | None = None, *, synthetic: bool = False, n: int | None = None,
              d: int | None = None, seed: int | None = None, k_sink: int | None = None,
              sink_strength: float | None = None, scale: Sequence[float] | None = None, order: str | None = None,
              sweep_scale: bool = False, recipe: str | None = None, settings: Mapping[str, object] | None = None,
              causal: bool | None = None, softmax_scale: float | None = None, without_sink: bool = False,
              launch_heads: int | None = None, threads: int = 0) -> results.PcollapseResult:
    """FP8 P-cast underflow behind an attention sink (`roundscope pcollapse --json`). inputs: a
    file, {"q", "k", "v"} arrays, or None for the synthetic scenario. None options keep the
    command's defaults. without_sink: also each run with the sink keys replaced by their
    neighbour (underflow_without_sink: what the spread of scores causes alone). launch_heads: B x H
    of the launch the inputs are a part of (one head of a layer measured alone), as attention()."""
    if scale is not None and not isinstance(scale, (int, float)) and len(scale) == 0:
        raise ValueError("scale: no static scale given (None runs the defaults, 1 and 256)")
    result = _core.pcollapse(_analysis_inputs(inputs), synthetic=synthetic, n=n, d=d, seed=seed, k_sink=k_sink,
                             sink_strength=sink_strength, scale=scale, order=order, sweep_scale=sweep_scale,
                             without_sink=without_sink, recipe=recipe, settings=settings, causal=causal,
                             softmax_scale=softmax_scale, launch_heads=launch_heads, threads=_threads(threads))
    return _cast(results.PcollapseResult, result)


def leak(inputs: Path | Arrays | None = None, *, synthetic: bool = False, n: int | None = None,
         d: int | None = None, seed: int | None = None, format: str | None = None, block: int | None = None,
         fix: bool = False, natural: bool = False, recipe: str | None = None,
         settings: Mapping[str, object] | None = None,
         max_tokens: int | None = None, causal: bool | None = None, softmax_scale: float | None = None,
         launch_heads: int | None = None, threads: int = 0) -> results.LeakResult:
    """Future leakage through V block-quantized along tokens (`roundscope leak --json`); `natural`
    also replaces each later token's K and V rows by another token's, beside V x 16."""
    result = _core.leak(_analysis_inputs(inputs), synthetic=synthetic, n=n, d=d, seed=seed, format=format, block=block,
                        fix=fix, natural=natural, recipe=recipe, settings=settings, max_tokens=max_tokens,
                        causal=causal, softmax_scale=softmax_scale, launch_heads=launch_heads,
                        threads=_threads(threads))
    return _cast(results.LeakResult, result)


def headroom(inputs: Path | Arrays | None = None, *, synthetic: bool = False, n: int | None = None,
             d: int | None = None, seed: int | None = None, scenario: str | None = None,
             causal: bool | None = None, softmax_scale: float | None = None,
             threads: int = 0) -> results.HeadroomResult:
    """Softmax overflow headroom, fused against non-fused (`roundscope headroom --json`)."""
    result = _core.headroom(_analysis_inputs(inputs), synthetic=synthetic, n=n, d=d, seed=seed, scenario=scenario,
                            causal=causal, softmax_scale=softmax_scale, threads=_threads(threads))
    return _cast(results.HeadroomResult, result)


def bias(inputs: Path | Arrays | Sequence[Path | Arrays] | None = None, *, synthetic: bool = False,
         n: int | None = None, d: int | None = None, seed: int | None = None, heads: int | None = None,
         recipe: str | None = None, settings: Mapping[str, object] | None = None, fix: bool = False,
         steps: int | None = None,
         tie_gap: float | None = None, tied_keys: int | None = None, d_model: int | None = None,
         causal: bool | None = None, softmax_scale: float | None = None, launch_heads: int | None = None,
         threads: int = 0) -> results.BiasResult:
    """The rounding bias of delta = rowsum(dO * O) (`roundscope bias --json`); several inputs
    (files or array mappings, one per training step) accumulate over steps. Synthetic: `tie_gap`
    (G) and `tied_keys` (1 for a single dominant key) shape the leading keys. launch_heads: B x H
    of the launch the inputs are a part of, as attention()."""
    result = _core.bias(_analysis_inputs(inputs), synthetic=synthetic, n=n, d=d, seed=seed, heads=heads, recipe=recipe,
                        settings=settings, fix=fix, steps=steps, tie_gap=tie_gap, tied_keys=tied_keys,
                        d_model=d_model, causal=causal, softmax_scale=softmax_scale, launch_heads=launch_heads,
                        threads=_threads(threads))
    return _cast(results.BiasResult, result)


def attribute(inputs: Path | Arrays | None = None, *, recipe: str, synthetic: bool = False,
              n: int | None = None, d: int | None = None, seed: int | None = None, scenario: str | None = None,
              settings: Mapping[str, object] | None = None, causal: bool | None = None,
              softmax_scale: float | None = None, launch_heads: int | None = None,
              threads: int = 0) -> results.AttributeResult:
    """Each rounding step's share of a recipe's error (`roundscope attribute --json`)."""
    result = _core.attribute(_analysis_inputs(inputs), synthetic=synthetic, n=n, d=d, seed=seed, scenario=scenario,
                             recipe=recipe, settings=settings, causal=causal, softmax_scale=softmax_scale,
                             launch_heads=launch_heads, threads=_threads(threads))
    return _cast(results.AttributeResult, result)


def _output_list(outputs: Sequence[str] | None) -> str | None:
    if outputs is None:
        return None
    if isinstance(outputs, str) or not all(isinstance(x, str) for x in outputs):
        raise TypeError("outputs: expected a sequence of output names such as ['o', 'lse']")
    return ",".join(outputs)


def compare(path: Path | Arrays, recipe: str, *, settings: Mapping[str, object] | None = None,
            causal: bool | None = None, softmax_scale: float | None = None, outputs: Sequence[str] | None = None,
            rtol: float | None = None, atol: float | None = None, launch_heads: int | None = None,
            threads: int = 0) -> results.CompareResult:
    """The outputs a kernel wrote into a dump (a file, or a mapping of arrays: q, k, v, do and
    the outputs) against the truth and the recipe's emulation (`roundscope compare --json`).
    outputs: compare only these (["o", "lse"]: a forward-only recipe against a dump with
    gradients); rtol and atol: count each output's elements outside them; launch_heads: B x H of
    the launch the dump's heads are a part of, as attention()."""
    dump = os.fsdecode(_cast(Any, path)) if _arrays.is_path(path) else _arrays.tensors_in(_cast(Any, path), "path")
    return _cast(results.CompareResult, _core.compare(
        dump, recipe=recipe, settings=settings, causal=causal, softmax_scale=softmax_scale,
        outputs=_output_list(outputs), rtol=rtol, atol=atol, launch_heads=launch_heads, threads=_threads(threads)))


def fit(dumps: Path | Arrays | Sequence[Path | Arrays], *, presets: Sequence[str] | None = None,
        keys: Sequence[str] | None = None, outputs: Sequence[str] | None = None, rows: int | None = None,
        seed: int | None = None, beam: int | None = None, max_evaluations: int | None = None,
        max_seconds: float | None = None, top: int | None = None, explain_rows: int | None = None,
        causal: bool | None = None, softmax_scale: float | None = None, launch_heads: int | None = None,
        threads: int = 0) -> results.FitResult:
    """Which recipe reproduces a kernel's outputs bit for bit (`roundscope fit --json`): a beam
    search from the presets (presets=[...] to start from some) over every key, or those named in
    keys, scored by the bits of every dump given (files, or mappings of arrays: q, k, v and the
    outputs). rows: search on that many query rows a head, confirm on all; explain_rows: where no
    recipe matches, the differing rows each single change is tried on."""
    many = isinstance(dumps, Sequence) and not isinstance(dumps, (str, bytes))
    listed = list(_cast(Sequence[Any], dumps)) if many else [dumps]
    return _cast(results.FitResult, _core.fit(
        [os.fsdecode(_cast(Any, d)) if _arrays.is_path(d) else _arrays.tensors_in(_cast(Any, d), "dumps")
         for d in listed],
        presets=presets, keys=keys, outputs=outputs, rows=rows, seed=seed, beam=beam,
        max_evaluations=max_evaluations, max_seconds=max_seconds, top=top, explain_rows=explain_rows,
        causal=causal, softmax_scale=softmax_scale, launch_heads=launch_heads, threads=_threads(threads)))


def check(dir: Path, *, junit: Path | None = None, max_ulp: int | None = None, max_row_ulp: float | None = None,
          min_match: float | None = None, rtol: float | None = None, atol: float | None = None,
          threads: int = 0) -> results.CheckResult:
    """Every golden file under dir checked bit for bit (`roundscope check --json`), or its
    attention dumps within the tolerances given; "failed" counts the failures (the command's
    exit code 1)."""
    return _cast(results.CheckResult, _core.check(
        os.fsdecode(dir), junit=None if junit is None else os.fsdecode(junit), max_ulp=max_ulp,
        max_row_ulp=max_row_ulp, min_match=min_match, rtol=rtol, atol=atol, threads=_threads(threads)))
