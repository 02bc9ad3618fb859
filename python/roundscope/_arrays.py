"""Arrays across the boundary: numpy arrays, torch CPU tensors and anything numpy can read go
to the C++ core as their raw bytes (a flat uint8 view, no copy where the array is already
contiguous) with roundscope's dtype name; tensors come back as numpy arrays of the matching
numpy or ml_dtypes type, or as raw bit patterns (uint8) for formats ml_dtypes lacks."""
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
# torch dtype name ("float8_e4m3fn") -> roundscope dtype name
_TORCH_NAMES: dict[str, str] = {}
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
_core.register_numpy_dtypes(NUMPY)



def is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _torch_raw(x, what: str):
    name = _TORCH_NAMES.get(str(x.dtype).removeprefix("torch."))
    if name is None:
        raise TypeError(f"{what}: torch dtype {x.dtype} has no roundscope format")
    if x.device.type != "cpu":
        raise TypeError(f"{what}: a tensor on {x.device}; roundscope reads CPU tensors (call .cpu())")
    x = x.detach()
    if not x.is_contiguous():
        x = x.contiguous()
    shape = tuple(x.shape)
    return x.reshape(-1).view(_torch_uint8()).numpy(), name, shape


def _torch_uint8():
    import torch
    return torch.uint8


def raw(x, what: str = "x", dtype: str | None = None):
    """(flat uint8 bytes, roundscope dtype name, shape) of an array-like, without a copy
    where the layout allows. `dtype` names the format of an array of raw bit patterns."""
    if is_torch_tensor(x):
        data, name, shape = _torch_raw(x, what)
    else:
        a = np.asarray(x)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        name = FROM_NUMPY.get(a.dtype)
        if name is None:
            raise TypeError(f"{what}: numpy dtype {a.dtype} has no roundscope format")
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        data, shape = a.reshape(-1).view(np.uint8), a.shape
    if dtype is not None:
        if dtype not in STORAGE_BYTES:
            raise ValueError(f"{what}: unknown format '{dtype}' (formats: {', '.join(sorted(FLOATING))})")
        if data.size != int(np.prod(shape, dtype=np.int64)) * STORAGE_BYTES[dtype]:
            raise TypeError(f"{what}: {name} elements are not {dtype} bit patterns "
                            f"({STORAGE_BYTES[dtype]} byte(s) each)")
        name = dtype
    return data, name, tuple(int(s) for s in shape)


def typed(bits: np.ndarray, name: str) -> np.ndarray:
    """The core's unsigned bit patterns as the numpy/ml_dtypes type of `name` (views, no copy);
    formats without one (ue4m3, the MXINT8 element int8) stay raw bit patterns."""
    dtype = NUMPY.get(name)
    if dtype is None or dtype == bits.dtype:
        return bits
    return bits.view(dtype)


def tensors_in(tensors: Mapping, what: str) -> dict:
    """{name: array-like} as the core's {name: (bytes, dtype, shape)}."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{what}: expected a path or a mapping of names to arrays, not {type(tensors).__name__}")
    return {str(k): raw(v, f"{what}['{k}']") for k, v in tensors.items()}


def tensors_out(tensors: dict) -> dict:
    """The core's {name: (bits, dtype)} as {name: typed array}."""
    return {k: typed(bits, name) for k, (bits, name) in tensors.items()}


def is_path(x) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))
