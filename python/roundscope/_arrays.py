"""Arrays across the boundary: numpy arrays, torch tensors and anything numpy can read go to
the C++ core as their raw bytes (a flat uint8 view, no copy where a CPU array is already
contiguous) with roundscope's dtype name; tensors come back as numpy arrays of the matching
numpy or ml_dtypes type, or as raw bit patterns (uint8) for formats ml_dtypes lacks, and as
torch tensors on the input's device where the input was one (to_torch, to_numpy)."""
from __future__ import annotations

import os
from collections.abc import Mapping

import ml_dtypes
import numpy as np

from . import _core

# roundscope dtype name -> numpy dtype (None: no numpy or ml_dtypes type; raw bits come back)
NUMPY: dict[str, np.dtype | None] = {}
# numpy dtype -> roundscope dtype name
FROM_NUMPY: dict[np.dtype, str] = {}
STORAGE_BYTES: dict[str, int] = {}
FLOATING: set[str] = set()
# torch dtype name ("float8_e4m3fn") -> roundscope dtype name, and back
_TORCH_NAMES: dict[str, str] = {}
TORCH_OF: dict[str, str] = {}
for _name, _descr, _ml, _bytes, _floating, _torch in _core.dtypes():
    _dtype = None
    if _descr:
        _dtype = np.dtype(_descr)
    elif _ml and hasattr(ml_dtypes, _ml):
        _dtype = np.dtype(getattr(ml_dtypes, _ml))
    NUMPY[_name] = _dtype
    STORAGE_BYTES[_name] = _bytes
    if _floating:
        FLOATING.add(_name)
    if _dtype is not None and _dtype not in FROM_NUMPY:
        FROM_NUMPY[_dtype] = _name
    if _torch:
        _TORCH_NAMES[_torch] = _name
        TORCH_OF[_name] = _torch
_core.register_numpy_dtypes(NUMPY)



def is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _torch_raw(x, what: str):
    name = _TORCH_NAMES.get(str(x.dtype).removeprefix("torch."))
    if name is None:
        raise TypeError(f"{what}: torch dtype {x.dtype} has no roundscope format")
    if x.device.type == "meta":
        raise TypeError(f"{what}: a tensor on the meta device has no values (it needs a CPU or GPU tensor)")
    x = x.detach().resolve_conj().resolve_neg()
    if x.device.type != "cpu":
        x = x.cpu()  # the core computes on the CPU: one copy, and results go back to x.device
    if not x.is_contiguous():
        x = x.contiguous()
    shape = tuple(x.shape)
    return x.reshape(-1).view(_torch_uint8()).numpy(), name, shape


def _torch_uint8():
    import torch
    return torch.uint8


def _numpy_in(x, what: str):
    """(x as a little-endian C-contiguous numpy array, its roundscope dtype name); a TypeError
    naming `what` where numpy's dtype has no roundscope format."""
    a = np.asarray(x)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    name = FROM_NUMPY.get(a.dtype)
    if name is None:
        raise TypeError(f"{what}: numpy dtype {a.dtype} has no roundscope format")
    return np.ascontiguousarray(a).reshape(a.shape), name  # ascontiguousarray makes a 0-d array 1-d


def raw(x, what: str = "x", dtype: str | None = None) -> tuple[np.ndarray, str, tuple[int, ...]]:
    """(flat uint8 bytes, roundscope dtype name, shape) of an array-like, without a copy
    where the layout allows. `dtype` names the format of an array of raw bit patterns."""
    if is_torch_tensor(x):
        data, name, shape = _torch_raw(x, what)
    else:
        a, name = _numpy_in(x, what)
        data, shape = a.reshape(-1).view(np.uint8), a.shape
    if dtype is not None:
        if dtype not in STORAGE_BYTES:
            raise ValueError(f"{what}: unknown format '{dtype}' (formats: {', '.join(sorted(FLOATING))})")
        if data.size != int(np.prod(shape, dtype=np.int64)) * STORAGE_BYTES[dtype]:
            raise TypeError(f"{what}: {name} elements are not {dtype} bit patterns "
                            f"({STORAGE_BYTES[dtype]} byte(s) each)")
        name = dtype
    return data, name, tuple(int(s) for s in shape)


def to_torch(a, device=None):
    """An array as a torch tensor of the same format, sharing its memory on the CPU (then moved to
    `device`): float8_e4m3fn, bfloat16, ... where torch has the format, uint8 bit patterns where
    it has none (float6, float4 one per byte, UE4M3, MXINT8's int8 element)."""
    import torch
    if is_torch_tensor(a):
        return a if device is None else a.to(device)
    a, name = _numpy_in(a, "a")
    torch_dtype = getattr(torch, TORCH_OF.get(name, ""), None) if TORCH_OF.get(name) else None
    if torch_dtype is None:
        t = torch.from_numpy(a.view(np.uint8) if a.dtype.itemsize == 1 else a)
    elif a.dtype.kind in "biuf" and a.dtype.type.__module__ == "numpy":
        t = torch.from_numpy(a)
    else:  # an ml_dtypes type: its bits, seen as torch's type of the same format
        signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
        t = torch.from_numpy(a.view(signed)).view(torch_dtype)
    return t if device is None else t.to(device)


def to_numpy(t, what: str = "t") -> np.ndarray:
    """A torch tensor (on any device) as a numpy array of the numpy or ml_dtypes type of its
    format, sharing memory with a contiguous CPU tensor; other array-likes through np.asarray."""
    if not is_torch_tensor(t):
        return np.asarray(t)
    data, name, shape = _torch_raw(t, what)
    bits = data.view(np.dtype(f"u{STORAGE_BYTES[name]}")).reshape(shape)
    return typed(bits, name)


def like(x, result):
    """`result` (an array, or a mapping of arrays and other values) as torch tensors on x's device
    where x is a torch tensor; unchanged otherwise."""
    if not is_torch_tensor(x):
        return result
    if isinstance(result, np.ndarray):
        return to_torch(result, x.device)
    if isinstance(result, dict):
        return {k: to_torch(v, x.device) if isinstance(v, np.ndarray) else v for k, v in result.items()}
    return result


def typed(bits: np.ndarray, name: str) -> np.ndarray:
    """The core's unsigned bit patterns as the numpy/ml_dtypes type of `name` (views, no copy);
    formats without one (ue4m3, the MXINT8 element int8) stay raw bit patterns."""
    dtype = NUMPY.get(name)
    if dtype is None or dtype == bits.dtype:
        return bits
    return bits.view(dtype)


def tensors_in(tensors: Mapping, what: str, by_name: bool = False) -> dict:
    """{name: array-like} as the core's {name: (bytes, dtype, shape)}; messages name an array
    what['name'], or (by_name: the arrays are arguments of their names) name alone."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{what}: expected a path or a mapping of names to arrays, not {type(tensors).__name__}")
    return {str(k): raw(v, str(k) if by_name else f"{what}['{k}']") for k, v in tensors.items()}


def tensors_out(tensors: dict) -> dict:
    """The core's {name: (bits, dtype)} as {name: typed array}."""
    return {k: typed(bits, name) for k, (bits, name) in tensors.items()}


def is_path(x) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))
