"""roundscope.torch: PyTorch's scaled_dot_product_attention with a recipe's kernel emulated bit
for bit, forward and backward, on the CPU, as a torch.autograd.Function, so that a model
trains with the numerics of FA2 in BF16, FA3 in FP8 or MXFP4 V on a machine without that GPU.

    import roundscope.torch as rst
    out = rst.scaled_dot_product_attention(q, k, v, is_causal=True, recipe="fa3-fp8")
    model.attention = rst.sdpa(recipe="fa2-bf16")   # a drop-in for F.scaled_dot_product_attention
"""
from __future__ import annotations

import functools
from collections.abc import Mapping

import torch

from . import attention as _attention

__all__ = ["scaled_dot_product_attention", "sdpa"]

class _EmulatedAttention(torch.autograd.Function):
    """Forward and backward by the emulator (roundscope attention [--backward])."""

    @staticmethod
    def forward(ctx, q, k, v, recipe, settings, causal, scale, threads):
        out = _attention(q, k, v, recipe=recipe, settings=settings, causal=causal, softmax_scale=scale,
                         threads=threads)
        ctx.save_for_backward(q, k, v)
        ctx.options = (recipe, settings, causal, scale, threads)
        return out["o"].to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors
        recipe, settings, causal, scale, threads = ctx.options
        out = _attention(q, k, v, recipe=recipe, settings=settings, causal=causal, softmax_scale=scale,
                         backward=True, do=grad, threads=threads)
        grads = [out[n].to(x.dtype) for n, x in (("dq", q), ("dk", k), ("dv", v))]
        return (*grads, None, None, None, None, None)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, *, recipe: str = "fa2-bf16",
                                 settings: Mapping | None = None, threads: int = 0) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention's arguments and shapes ([B, H, N, D], or
    [H, N, D], [N, D]), computed as the kernel of `recipe` computes it (roundscope recipes lists
    them; `settings` change one, as --set does). The inputs are read in their dtype and rounded
    into the recipe's input format as the kernel's caller would; the output and the gradients come
    back in the inputs' dtypes. is_causal needs Nq = Nk, where PyTorch's mask (top-left) and the
    kernels' (bottom-right, FlashAttention 2.1+) agree: query i sees keys 0..i.
    enable_gqa: key and value with fewer heads are repeated per query group, as PyTorch's math
    path does, and their gradients summed by PyTorch. attn_mask and dropout are refused (the
    emulated kernels take neither)."""
    if attn_mask is not None:
        raise ValueError("attn_mask: the emulated kernels take no mask (is_causal=True masks causally)")
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: the emulated kernels have no dropout, not {dropout_p}")
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError(f"is_causal: {query.shape[-2]} queries against {key.shape[-2]} keys; PyTorch aligns the "
                         "causal mask top-left, the emulated kernels bottom-right, so only Nq = Nk is the same mask")
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        groups, rest = divmod(query.shape[-3], key.shape[-3])
        if rest:
            raise ValueError(f"enable_gqa: {query.shape[-3]} query heads are not a multiple of "
                             f"{key.shape[-3]} key heads")
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    return _EmulatedAttention.apply(query, key, value, recipe, dict(settings) if settings else None,
                                    bool(is_causal), scale, threads)


def sdpa(recipe: str = "fa2-bf16", settings: Mapping | None = None, threads: int = 0):
    """scaled_dot_product_attention with the recipe fixed: a drop-in for
    torch.nn.functional.scaled_dot_product_attention."""
    return functools.partial(scaled_dot_product_attention, recipe=recipe, settings=settings, threads=threads)
