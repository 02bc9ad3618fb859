"""roundscope.torch: PyTorch's scaled_dot_product_attention with a recipe's kernel emulated bit
for bit, forward and backward, on the CPU, as a torch.autograd.Function, so that a model
trains with the numerics of FA2 in BF16, FA3 in FP8 or MXFP4 V on a machine without that GPU.

    import roundscope.torch as rst
    with rst.emulate("fa3-fp8"):                     # every SDPA call in the block
        loss = model(batch).loss
        loss.backward()
    out = rst.scaled_dot_product_attention(q, k, v, is_causal=True, recipe="fa3-fp8")
"""
from __future__ import annotations

import collections
import functools
import inspect
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import attention as _attention

__all__ = ["scaled_dot_product_attention", "sdpa", "emulate"]

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


def _refusal(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa) -> str | None:
    """Why the emulated kernels cannot run this call (None: they can), naming the argument."""
    if attn_mask is not None:
        return "attn_mask: the emulated kernels take no mask (is_causal=True masks causally)"
    if dropout_p != 0.0:
        return f"dropout_p: the emulated kernels have no dropout, not {dropout_p}"
    if is_causal and query.shape[-2] != key.shape[-2]:
        return (f"is_causal: {query.shape[-2]} queries against {key.shape[-2]} keys; PyTorch aligns the causal mask "
                "top-left, the emulated kernels bottom-right, so only Nq = Nk is the same mask")
    if query.dim() > 4:
        return f"query: {query.dim()} dimensions; the emulated kernels take [B, H, N, D], [H, N, D] or [N, D]"
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3] and query.shape[-3] % key.shape[-3]:
        return f"enable_gqa: {query.shape[-3]} query heads are not a multiple of {key.shape[-3]} key heads"
    return None


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
    refusal = _refusal(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if refusal is not None:
        raise ValueError(refusal)
    return _emulated(query, key, value, is_causal, scale, enable_gqa, recipe, settings, threads)


def _emulated(query, key, value, is_causal, scale, enable_gqa, recipe, settings, threads):
    """The call, already checked by _refusal, through the emulator."""
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    return _EmulatedAttention.apply(query, key, value, recipe, dict(settings) if settings else None,
                                    bool(is_causal), scale, threads)


def sdpa(recipe: str = "fa2-bf16", settings: Mapping | None = None, threads: int = 0):
    """scaled_dot_product_attention with the recipe fixed: a drop-in for
    torch.nn.functional.scaled_dot_product_attention."""
    return functools.partial(scaled_dot_product_attention, recipe=recipe, settings=settings, threads=threads)


# PyTorch's own function, whatever F.scaled_dot_product_attention is bound to while emulate runs.
_TORCH_SDPA = F.scaled_dot_product_attention
_SDPA_SIGNATURE = inspect.signature(lambda query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                    scale=None, enable_gqa=False: None)


@functools.lru_cache(maxsize=64)
def _check_recipe(recipe: str, settings: tuple) -> None:
    """The recipe and settings checked by the core on a one-token head (an exception naming the
    argument otherwise), once per distinct pair: a training loop enters emulate every step."""
    one = np.ones((1, 8), np.float32)
    _attention(one, one, one, recipe=recipe, settings=dict(settings) or None)


_ACTIVE: list = []  # the emulate blocks running, innermost last


def active_emulation():
    """The innermost emulate block running (roundscope.dump records its recipe), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


class emulate(TorchFunctionMode):
    """Within the block, every call of torch.nn.functional.scaled_dot_product_attention runs as
    the kernel of `recipe` computes it (scaled_dot_product_attention above, forward and backward):
    a TorchFunctionMode, so code that imported the function by name, and modules that call it
    (nn.MultiheadAttention, Hugging Face models), are caught too.

        with roundscope.torch.emulate("fa3-fp8", fallback="exact") as mode:
            loss = model(batch).loss
            loss.backward()
        mode.emulated, mode.fallbacks      # 24, Counter({'dropout_p': 2})

    Calls the kernels cannot run (a mask, dropout, causal with Nq != Nk, GQA with a group that
    does not divide) go by `fallback`: "exact" runs PyTorch's own attention in float64 on the
    inputs (the exact result within float64's rounding, then rounded once to the inputs' dtype),
    "torch" runs PyTorch's call unchanged, "error" raises the ValueError that names the
    argument. `fallbacks` counts them by that argument. The recipe and settings are checked on
    entry.

    PyTorch hides the calls made inside its own overridable Python functions from a mode
    (F.multi_head_attention_forward, which nn.MultiheadAttention and nn.TransformerEncoderLayer
    use, runs with the mode off), so for the block F.scaled_dot_product_attention is also
    rebound to the emulation, which such functions look up when they call it. Under torch.compile the emulator cannot be traced: a call there raises RuntimeError
    (run the model eagerly, or keep emulate outside the compiled function)."""

    FALLBACKS = ("exact", "torch", "error")

    def __init__(self, recipe: str = "fa2-bf16", *, fallback: str = "exact", settings: Mapping | None = None,
                 threads: int = 0):
        super().__init__()
        if fallback not in self.FALLBACKS:
            raise ValueError(f"fallback: {fallback!r} is not one of {', '.join(self.FALLBACKS)}")
        if settings is not None and not isinstance(settings, Mapping):
            raise TypeError("settings: expected a mapping of recipe keys to values")
        _check_recipe(recipe, tuple(sorted((str(k), str(v)) for k, v in (settings or {}).items())))
        self.recipe, self.settings, self.threads, self.fallback = recipe, dict(settings or {}), threads, fallback
        self.emulated = 0
        self.fallbacks: collections.Counter = collections.Counter()
        self._falling_back = False  # PyTorch's own call, made from _attention: the mode lets it through

    def __enter__(self):
        self._rebound = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = self._attention
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        F.scaled_dot_product_attention = self._rebound
        _ACTIVE.remove(self)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Every torch call in the block comes here: the common case first and cheap.
        if func is not _TORCH_SDPA or self._falling_back:
            return func(*args, **kwargs) if kwargs else func(*args)
        return self._attention(*args, **(kwargs or {}))

    def _attention(self, *args, **kwargs):
        """One call of scaled_dot_product_attention, emulated or sent to the fallback."""
        func = _TORCH_SDPA
        if torch.compiler.is_compiling():
            raise RuntimeError("roundscope.torch.emulate: scaled_dot_product_attention under torch.compile; the "
                               "emulator runs outside any graph, so run the model eagerly inside emulate")
        call = _SDPA_SIGNATURE.bind(*args, **kwargs).arguments
        options = {n: call.get(n, p.default) for n, p in _SDPA_SIGNATURE.parameters.items()}
        refusal = _refusal(options["query"], options["key"], options["value"], options["attn_mask"],
                           options["dropout_p"], options["is_causal"], options["enable_gqa"])
        if refusal is None:
            self.emulated += 1
            return _emulated(options["query"], options["key"], options["value"], options["is_causal"],
                             options["scale"], options["enable_gqa"], self.recipe, self.settings or None, self.threads)
        if self.fallback == "error":
            raise ValueError(f"roundscope.torch.emulate: {refusal}")
        self.fallbacks[refusal.split(":", 1)[0]] += 1
        self._falling_back = True
        try:
            if self.fallback == "torch":
                return func(*args, **kwargs)
            dtype = options["query"].dtype
            wide = {n: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                    for n, v in call.items()}  # the arguments given: an older torch lacks enable_gqa
            return func(**wide).to(dtype)
        finally:
            self._falling_back = False
