"""Block-scaled formats: OCP MX (mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8;
E8M0 scales under the floor, ceil, even or rceil rule) and NVIDIA NVFP4 (format="nvfp4": 16
E2M1 elements, a UE4M3 scale per block and a float32 per-tensor scale). Quantizing runs
`roundscope mx` in this process."""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from . import _arrays, _core, results


@dataclass(frozen=True)
class Quantized:
    """A block-quantized tensor: elements in the input's shape, scales with the blocked axis cut
    to the number of blocks (uint8 bit patterns for NVFP4's UE4M3), and how it was blocked."""
    elements: np.ndarray
    scales: np.ndarray
    per_tensor_scale: float | None
    format: str
    block: int
    axis: int
    offset: int
    scale_rule: str


def _options(format, block, axis, offset, scale_rule, rounding, seed, single_level, threads) -> dict:
    return dict(format=format, block=block, axis=axis, offset=offset, scale_rule=scale_rule, rounding=rounding,
                seed=seed, single_level=single_level, threads=threads)


def quantize(x, format: str, block: int | None = None, axis: int = -1, offset: int = 0, scale_rule: str = "floor",
             rounding: str | None = None, seed: int = 0, single_level: bool = False, threads: int = 0) -> Quantized:
    """Blocks of `block` elements (default 32; NVFP4 16) along `axis` (-2: the token axis of
    [.., N, D]), starting at positions j * block - offset, each quantized with one shared scale.
    Where x is a torch tensor, elements and scales are torch tensors on its device (uint8 bit
    patterns where torch has no such type)."""
    result, (out, _) = _core.mx_quantize(
        _arrays.tensors_in({"x": x}, "x", by_name=True),
        **_options(format, block, axis, offset, scale_rule, rounding, seed, single_level, threads))
    tensors = _arrays.tensors_out(out)
    per_tensor = tensors.get("x.per_tensor_scale")
    return Quantized(_arrays.like(x, tensors["x.elements"]), _arrays.like(x, tensors["x.scales"]),
                     None if per_tensor is None else float(per_tensor), result["format"], result["block"],
                     result["axis"], result["offset"], result["scale_rule"])


def dequantize(q: Quantized, threads: int = 0) -> np.ndarray:
    """The values a Quantized holds, as float32 (each element times its scale, rounded once); a
    torch tensor where its elements are."""
    # Formats that come as raw bits (MXINT8's elements, NVFP4's UE4M3 scales, and as torch
    # tensors the float6 and float4 elements) are read as the block format's types.
    elements = _arrays.raw(q.elements, "elements", _ELEMENTS[q.format] if _is_bits(q.elements) else None)
    scales = _arrays.raw(q.scales, "scales", "ue4m3" if q.format == "nvfp4" else None)
    bits = _core.mx_dequantize(*elements, *scales, q.per_tensor_scale, q.format, q.block, q.axis, q.offset, threads)
    return _arrays.like(q.elements, cast(np.ndarray, bits).view(np.float32))


# Each block format's element format (`roundscope formats`).
_ELEMENTS = {"mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2", "mxfp6_e2m3": "e2m3", "mxfp6_e3m2": "e3m2", "mxfp4": "e2m1",
             "mxint8": "int8", "nvfp4": "e2m1"}


def _is_bits(a) -> bool:
    return str(a.dtype) in ("uint8", "torch.uint8")


def compare_rules(x, format: str, block: int | None = None, axis: int = -1, offset: int = 0,
                  rounding: str | None = None, seed: int = 0, threads: int = 0) -> results.CompareRulesResult:
    """Per scale rule: the blocks whose scale differs from floor's, scales moved up or down,
    saturated elements and the errors (`roundscope mx --compare-rules --json`)."""
    return cast(results.CompareRulesResult, _core.mx_compare_rules(
        _arrays.tensors_in({"x": x}, "x", by_name=True),
        **_options(format, block, axis, offset, None, rounding, seed, False, threads)))
