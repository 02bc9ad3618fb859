"""roundscope.torch: PyTorch's scaled_dot_product_attention with a recipe's kernel emulated bit
for bit, forward and backward, on the CPU, as a torch.autograd.Function, so that a model
trains with the numerics of FA2 in BF16, FA3 in FP8 or MXFP4 V on a machine without that GPU.

    import roundscope.torch as rst
    with rst.emulate("fa3-fp8"):                     # every SDPA call in the block
        loss = model(batch).loss
        loss.backward()
    out = rst.scaled_dot_product_attention(q, k, v, is_causal=True, recipe="fa3-fp8")

rst.monitor (roundscope/monitor.py) logs the report's figures of chosen layers every N steps of a
training run, to TensorBoard and a JSON-lines file. rst.cpu_settings() gives the settings of
torch-cpu-bf16 that reproduce PyTorch's own CPU attention on this machine, rst.cpu_math_settings()
those of torch-cpu-math (its math path, where V's head dimension is not Q's).
"""
from __future__ import annotations

import collections
import contextvars
import functools
import inspect
import threading
import warnings
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import attention as _attention
from ._torch_cpu import cpu_math_settings, cpu_settings
from .monitor import monitor

__all__ = ["scaled_dot_product_attention", "sdpa", "emulate", "monitor", "cpu_settings", "cpu_math_settings"]

class _EmulatedAttention(torch.autograd.Function):
    """Forward and backward by the emulator (roundscope attention [--backward]). The mask is
    PyTorch's: is_causal aligned top-left, attn_mask broadcast over [B, H, Nq, Nk]; k and v with
    fewer heads are grouped-query attention, whose dk and dv the emulator sums over each group as
    the recipe says."""

    @staticmethod
    def forward(ctx, q, k, v, attn_mask, recipe, settings, causal, scale, threads, softcap):
        options = dict(recipe=recipe, settings=settings, causal=causal, softmax_scale=scale, threads=threads,
                       attn_mask=attn_mask, causal_alignment="top-left" if causal else None, softcap=softcap)
        out = _attention(q, k, v, **options)
        ctx.save_for_backward(q, k, v)
        ctx.options = options
        return out["o"].to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors
        out = _attention(q, k, v, backward=True, do=grad, **ctx.options)
        grads = [out[n].to(x.dtype) for n, x in (("dq", q), ("dk", k), ("dv", v))]
        return (*grads, None, None, None, None, None, None, None)


def _refusal(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa) -> str | None:
    """Why the emulated kernels cannot run this call (None: they can), naming the argument."""
    if attn_mask is not None and attn_mask.requires_grad:
        return "attn_mask: a mask that needs a gradient (a learned bias): the emulator gives none"
    if dropout_p != 0.0:
        return f"dropout_p: the emulated kernels have no dropout, not {dropout_p}"
    if query.dim() > 4:
        return f"query: {query.dim()} dimensions; the emulated kernels take [B, H, N, D], [H, N, D] or [N, D]"
    if query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        if not enable_gqa:
            return (f"enable_gqa: {query.shape[-3]} query heads against {key.shape[-3]} key heads need "
                    "enable_gqa=True")
        if query.shape[-3] % key.shape[-3]:
            return f"enable_gqa: {query.shape[-3]} query heads are not a multiple of {key.shape[-3]} key heads"
    return None


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, *, recipe: str = "fa2-bf16",
                                 settings: Mapping | None = None, threads: int = 0,
                                 softcap: float | None = None) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention's arguments and shapes ([B, H, N, D], or
    [H, N, D], [N, D]), computed as the kernel of `recipe` computes it (roundscope recipes lists
    them; `settings` change one, as --set does). The inputs are read in their dtype and rounded
    into the recipe's input format as the kernel's caller would; the output and the gradients come
    back in the inputs' dtypes. The mask is PyTorch's: is_causal aligned top-left (query i sees
    keys 0..i, also where Nq != Nk), attn_mask boolean (True takes part) or additive, broadcast
    over [B, H, Nq, Nk]; a row whose every key is masked gives 0, as PyTorch's math backend does.
    enable_gqa: key and value with fewer heads, each read by its group of query heads, their
    gradients summed over the group as the recipe's kernel sums them (in float32, rounded once).
    Dropout and a mask that needs a gradient are refused (the emulated kernels take neither).
    softcap (roundscope's, beyond PyTorch's arguments): scores capped as softcap tanh(s / softcap)
    before the mask, as FlashAttention-2 caps them."""
    refusal = _refusal(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if refusal is not None:
        raise ValueError(refusal)
    return _emulated(query, key, value, attn_mask, is_causal, scale, recipe, settings, threads, softcap)


def _emulated(query, key, value, attn_mask, is_causal, scale, recipe, settings, threads, softcap=None):
    """The call, already checked by _refusal, through the emulator."""
    return _EmulatedAttention.apply(query, key, value, attn_mask, recipe, dict(settings) if settings else None,
                                    bool(is_causal), scale, threads, softcap)


def sdpa(recipe: str = "fa2-bf16", settings: Mapping | None = None, threads: int = 0):
    """scaled_dot_product_attention with the recipe fixed: a drop-in for
    torch.nn.functional.scaled_dot_product_attention."""
    return functools.partial(scaled_dot_product_attention, recipe=recipe, settings=settings, threads=threads)


# PyTorch's own functions, whatever F.scaled_dot_product_attention is bound to while emulate runs.
_TORCH_SDPA = F.scaled_dot_product_attention
_TORCH_MHA = F.multi_head_attention_forward
_MHA_SIGNATURE = inspect.signature(F.multi_head_attention_forward)
_SDPA_SIGNATURE = inspect.signature(lambda query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                    scale=None, enable_gqa=False: None)


@functools.lru_cache(maxsize=64)
def _check_recipe(recipe: str, settings: tuple) -> None:
    """The recipe and settings checked by the core on a one-token head (an exception naming the
    argument otherwise), once per distinct pair: a training loop enters emulate every step."""
    one = np.ones((1, 8), np.float32)
    _attention(one, one, one, recipe=recipe, settings=dict(settings) or None)


# The emulate block running in this thread (and asyncio task), innermost: a context variable, so
# that another thread's call of scaled_dot_product_attention is never emulated by this one's block.
_CURRENT: contextvars.ContextVar = contextvars.ContextVar("roundscope_emulate", default=None)


def active_emulation():
    """The innermost emulate block running in this thread (roundscope.dump records its recipe), or None."""
    return _CURRENT.get()


class _Hook:
    """The one process-wide binding of F.scaled_dot_product_attention while any emulate block runs
    (PyTorch's own functions, F.multi_head_attention_forward among them, look the name up with the
    mode off): it sends a call to the block running in the calling thread, or, where none runs
    there, to the function bound before. Installed by the first block to enter, removed by the last
    to leave, and only if the binding is still the hook's (so another rebinding, roundscope.dump's
    step, is never undone)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.blocks = 0  # entered and not yet left, over every thread
        self.before = None  # what F.scaled_dot_product_attention was when the hook went in
        self.bound = None  # the binding the hook made (itself, or roundscope.dump's wrapper of it)

    def __call__(self, *args, **kwargs):
        mode = _CURRENT.get()
        if mode is None:
            return self.plain(*args, **kwargs)
        return mode._attention(*args, **kwargs)

    def plain(self, *args, **kwargs):
        """The function bound before the hook, without roundscope.dump's capture around it (which
        wraps the hook itself where the dump's step is the outer one)."""
        f = self.before
        while getattr(f, "roundscope_inner", None) is not None:
            f = f.roundscope_inner
        return f(*args, **kwargs)

    def enter(self):
        with self.lock:
            if self.blocks == 0:
                self.before = F.scaled_dot_product_attention
                # inside roundscope.dump's step: the dump goes on capturing, around the hook
                rewrap = getattr(self.before, "roundscope_rewrap", None)
                self.bound = _dispatch if rewrap is None else rewrap(_dispatch)
                F.scaled_dot_product_attention = self.bound
            self.blocks += 1

    def leave(self):
        with self.lock:
            self.blocks -= 1
            if self.blocks == 0:
                if F.scaled_dot_product_attention is self.bound:
                    F.scaled_dot_product_attention = self.before
                self.before = self.bound = None


_HOOK = _Hook()


@torch.compiler.disable  # a compiled function's call runs here eagerly (the emulator is no graph)
def _dispatch(*args, **kwargs):
    """What F.scaled_dot_product_attention is bound to while an emulate block runs (_Hook)."""
    return _HOOK(*args, **kwargs)


class emulate(TorchFunctionMode):
    """Within the block, every call of torch.nn.functional.scaled_dot_product_attention runs as
    the kernel of `recipe` computes it (scaled_dot_product_attention above, forward and backward):
    a TorchFunctionMode, so code that imported the function by name, and modules that call it
    (nn.MultiheadAttention, Hugging Face models), are caught too.

        with roundscope.torch.emulate("fa3-fp8", fallback="exact") as mode:
            loss = model(batch).loss
            loss.backward()
        mode.emulated, mode.fallbacks      # 24, Counter({'dropout_p': 2})

    Calls the kernels cannot run (dropout, a mask that needs a gradient, GQA with a group that
    does not divide, nn.MultiheadAttention returning its weights) go by `fallback`: "exact" runs
    PyTorch's own attention in float64 on the inputs (the exact result within float64's rounding,
    then rounded once to the inputs' dtype), "torch" runs PyTorch's call unchanged, "error" raises
    the ValueError that names the argument. `fallbacks` counts them by that argument. The recipe
    and settings are checked on entry.

    PyTorch hides the calls made inside its own overridable Python functions from a mode
    (F.multi_head_attention_forward, which nn.MultiheadAttention and nn.TransformerEncoderLayer
    use, runs with the mode off), so while any block runs F.scaled_dot_product_attention is
    bound to one process-wide hook, which such functions look up when they call it: it sends a
    call to the block running in the calling thread (a context variable), and a call from a
    thread where none runs to PyTorch's own function. Blocks nest and re-enter (with m: with m:);
    the last to leave restores the binding exactly. Under torch.compile the emulator cannot be
    traced: a call there raises RuntimeError (run the model eagerly, or keep emulate outside the compiled function)."""

    FALLBACKS = ("exact", "torch", "error")

    def __init__(self, recipe: str = "fa2-bf16", *, fallback: str = "exact", settings: Mapping | None = None,
                 threads: int = 0):
        super().__init__()
        if fallback not in self.FALLBACKS:
            raise ValueError(f"fallback: {fallback!r} is not one of {', '.join(self.FALLBACKS)}")
        if settings is not None and not isinstance(settings, Mapping):
            raise TypeError("settings: expected a mapping of recipe keys to values")
        if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= 1024:
            raise ValueError(f"threads: must be an integer from 0 (every core) to 1024, not {threads!r}")
        _check_recipe(recipe, tuple(sorted((str(k), str(v)) for k, v in (settings or {}).items())))
        self.recipe, self.settings, self.threads, self.fallback = recipe, dict(settings or {}), threads, fallback
        self.emulated = 0
        self.fallbacks: collections.Counter = collections.Counter()
        self._local = threading.local()  # per thread: the context tokens of this block's entries,
        # and whether PyTorch's own call, made from _attention as the fallback, is running

    def __enter__(self):
        tokens = self._local.__dict__.setdefault("tokens", [])
        _HOOK.enter()
        tokens.append(_CURRENT.set(self))  # re-entered (with m: with m:), each entry its own token
        try:
            return super().__enter__()
        except BaseException:
            _CURRENT.reset(tokens.pop())
            _HOOK.leave()
            raise

    def __exit__(self, *exc):
        try:
            result = super().__exit__(*exc)
        finally:
            _CURRENT.reset(self._local.tokens.pop())
            _HOOK.leave()
        if exc[0] is None and self.emulated == 0 and not self.fallbacks:
            warnings.warn("roundscope.torch.emulate: the block called no scaled_dot_product_attention: nothing was "
                          "emulated (an attention written out in matmuls and softmax is not seen)", stacklevel=2)
        return result

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # Every torch call in the block comes here: the common case first and cheap.
        if func is _TORCH_MHA:
            self._multi_head_attention(args, kwargs or {})
        if func is not _TORCH_SDPA or getattr(self._local, "falling_back", False):
            return func(*args, **kwargs) if kwargs else func(*args)
        return self._attention(*args, **(kwargs or {}))

    def _multi_head_attention(self, args, kwargs):
        """nn.MultiheadAttention with need_weights=True (its default) returns the attention weights,
        so PyTorch computes it with matmuls and softmax in the model's dtype, not through
        scaled_dot_product_attention: counted as a fallback of that name (warned once a block), or
        refused with fallback="error". need_weights=False reaches scaled_dot_product_attention and is
        emulated."""
        call = _MHA_SIGNATURE.bind(*args, **kwargs).arguments
        if not call.get("need_weights", True):
            return
        message = ("need_weights: nn.MultiheadAttention with need_weights=True computes attention without "
                   "scaled_dot_product_attention (to return the weights); pass need_weights=False to emulate it")
        if self.fallback == "error":
            raise ValueError(f"roundscope.torch.emulate: {message}")
        if not self.fallbacks["need_weights"]:
            warnings.warn(f"roundscope.torch.emulate: {message}; it ran as PyTorch computes it", stacklevel=4)
        self.fallbacks["need_weights"] += 1

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
            return _emulated(options["query"], options["key"], options["value"], options["attn_mask"],
                             options["is_causal"], options["scale"], self.recipe, self.settings or None, self.threads)
        if self.fallback == "error":
            raise ValueError(f"roundscope.torch.emulate: {refusal}")
        self.fallbacks[refusal.split(":", 1)[0]] += 1
        self._local.falling_back = True
        try:
            if self.fallback == "torch":
                return func(*args, **kwargs)
            dtype = options["query"].dtype
            wide = {n: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                    for n, v in call.items()}  # the arguments given: an older torch lacks enable_gqa
            return func(**wide).to(dtype)
        finally:
            self._local.falling_back = False
