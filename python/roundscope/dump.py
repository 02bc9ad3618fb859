"""roundscope.dump: capture the inputs of attention layers from a PyTorch training run.

For the chosen layers and steps it saves q, k, v and the attention output o from the forward
pass, and do (the gradient of o) from the backward pass, into one safetensors file per layer
and step, keeping the original dtypes (BF16 and FP8 stay as they are), with metadata that
`roundscope` reads: layer, step, causal, softmax_scale, and for FP8 kernels their descale
factors. The three lines in a training loop:

    from roundscope.dump import AttentionDump                         # 1
    dump = AttentionDump("dumps", layers=[0, 11], steps=[1000])       # 2
    for step, batch in enumerate(loader):
        with dump.step(step):                                         # 3: around forward and backward
            loss = model(batch).loss
            loss.backward()
        optimizer.step()

To give `roundscope bias` the query-weight part of the gradient error (dW^Q), hand the layer
input the query projection reads and its weight to the dump just before the attention call:
`dump.layer_inputs(x=h, wq=w)` with q = h w ([B, N, M] and [M, H * D]); they join that call's
file as x and wq (`dump.capturing` says whether this step is being captured).

Inside `dump.step(step)`, every call of torch.nn.functional.scaled_dot_product_attention is
one layer, counted from 0 in call order (calls during backward, as activation checkpointing
makes, are not counted). With gradient accumulation, a forward pass that follows a backward
pass within the step starts the next micro-batch, whose layers count from 0 again (the same
holds where dump.step(step) is entered again for the same step, or micro_batch= is given):
micro-batch m > 0 is written as stepS_mbM_layerL.safetensors, and every file carries
`micro_batch` in its metadata.

The recipe a kernel computes as, when it is one of roundscope's (`roundscope recipes`), goes
into the metadata as `recipe` (and `recipe_settings`, JSON) so that `roundscope check` can
verify the dumps bit for bit: AttentionDump(..., recipe="fa3-fp8", settings={...}) names it,
and inside roundscope.torch.emulate(...) each emulated call is recorded with the emulated
recipe. Code that imported the function by name before the step began
(`from torch.nn.functional import scaled_dot_product_attention`) is not seen; wrap such
functions, or any other attention kernel (an FP8 one taking descale_q/descale_k/descale_v, for
instance), with `dump.wrap(fn)`. A function that takes its options positionally names them:
`dump.wrap(FlashAttentionFunction.apply, positional=("mask", "causal", "q_bucket_size",
"k_bucket_size"))` records `FlashAttentionFunction.apply(q, k, v, None, True, 512, 512)` as
causal.
"""
import contextlib
import json
import math
import os
import struct
import sys
import tempfile
import types
import warnings

import torch
import torch.nn.functional as F

__all__ = ["AttentionDump", "write_safetensors", "replacing"]

_safetensors_torch: types.ModuleType | None
try:
    import safetensors.torch as _safetensors_torch
except ImportError:  # the writer below needs only PyTorch
    _safetensors_torch = None

# torch dtype -> safetensors dtype (huggingface/safetensors, src/tensor.rs `Dtype`).
_SAFETENSORS_DTYPES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32",
    torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
}
for _name, _st in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("float8_e4m3fnuz", "F8_E4M3FNUZ"),
                   ("float8_e5m2fnuz", "F8_E5M2FNUZ"), ("float8_e8m0fnu", "F8_E8M0"), ("float4_e2m1fn_x2", "F4"),
                   ("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")):
    if hasattr(torch, _name):
        _SAFETENSORS_DTYPES[getattr(torch, _name)] = _st


WRITERS = ("roundscope", "safetensors")

_UMASK = os.umask(0)  # read once (os.umask can only be read by setting it), and put back at once
os.umask(_UMASK)


@contextlib.contextmanager
def replacing(path, mode="wb"):
    """A file to write whole and then rename over `path`: opened under a new name of its own in
    path's folder (mkstemp: never a file already there, never another writer's), with the
    permissions a plain open would give; removed where the writing fails, so that path is either
    as it was or the whole new file. Yields (file, its name)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, partial = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".partial")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode) as f:
            yield f, partial
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise


def write_safetensors(path, tensors, metadata=None, writer="roundscope"):
    """Writes {name: tensor} with string metadata, bit for bit, in the safetensors format,
    atomically; returns the writer that wrote it.

    writer "roundscope" (the default): the writer below, byte for byte the same file for the same
    tensors and metadata. "safetensors": the `safetensors` package, where it is installed and
    knows every dtype (else the writer below). The package's header orders the metadata
    differently from one process to the next (a Rust HashMap: measured with safetensors 0.8),
    so the same run does not give the same bytes twice; its tensors are the same bits."""
    if writer not in WRITERS:
        raise ValueError(f"writer: {writer!r} is not one of {', '.join(WRITERS)}")
    path = os.fspath(path)
    metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
    if writer == "safetensors" and _safetensors_torch is not None:
        try:
            with replacing(path) as (_, partial):
                _safetensors_torch.save_file({n: t.detach().contiguous().cpu() for n, t in tensors.items()},
                                             partial, metadata=metadata or None)
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # a dtype the package does not know: the writer below
        else:
            return "safetensors"
    _write_safetensors_by_hand(path, tensors, metadata)
    return "roundscope"


def _write_safetensors_by_hand(path, tensors, metadata):
    entries = []
    for name, t in tensors.items():
        if t.dtype not in _SAFETENSORS_DTYPES:
            raise TypeError(f"roundscope.dump: {name}: dtype {t.dtype} has no safetensors dtype")
        data = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
        shape = list(t.shape)
        if t.dtype == getattr(torch, "float4_e2m1fn_x2", None):
            shape[-1] *= 2  # the header gives the logical shape: two values a byte
        entries.append((t.element_size(), name, _SAFETENSORS_DTYPES[t.dtype], shape, data))
    entries.sort(key=lambda e: (-e[0], e[1]))  # widest first: every tensor's data stays aligned
    header, offset = {}, 0
    for _, name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with replacing(path) as (f, _):
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for *_, data in entries:
            f.write(data)


def _compact_mask(mask):
    """The mask with every broadcast (stride 0) dimension kept at extent 1: a padding mask expanded
    to [B, H, N, N] is saved as [B, 1, N, N] or [B, 1, 1, N], as the consumers broadcast it back."""
    for dim in range(mask.dim()):
        if mask.stride(dim) == 0 and mask.shape[dim] > 1:
            mask = mask.narrow(dim, 0, 1)
    return mask.clone().contiguous()


def _emulation():
    """The innermost roundscope.torch.emulate block running, if roundscope.torch is in use."""
    module = sys.modules.get("roundscope.torch")
    return None if module is None else module.active_emulation()


def _in_backward():
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


class _Capture:
    """What one layer's call left behind; written when the step ends."""

    def __init__(self, layer, tensors, metadata):
        self.layer, self.tensors, self.metadata = layer, tensors, metadata


class AttentionDump:
    def __init__(self, directory, layers=None, steps=None, recipe=None, settings=None, writer="roundscope"):
        """layers, steps: iterables of indices to capture (None: all). recipe, settings: the
        roundscope recipe the attention kernel computes as, recorded in every file (for
        `roundscope check`); inside roundscope.torch.emulate the emulated recipe is recorded
        without them. writer: write_safetensors's ("safetensors": the package's writer, whose
        header bytes vary from run to run)."""
        if writer not in WRITERS:
            raise ValueError(f"writer: {writer!r} is not one of {', '.join(WRITERS)}")
        self.writer = writer
        self.directory = directory
        self.layers = None if layers is None else set(layers)
        self.steps = None if steps is None else set(steps)
        if settings is not None and recipe is None:
            raise ValueError("settings: recipe settings need the recipe they change (recipe=...)")
        self.recipe = None if recipe is None else (str(recipe), dict(settings or {}))
        self.written = []
        self._step = None
        self._micro_batch = 0
        self._backward_seen = False  # a backward pass ran since this micro-batch's first forward call
        self._micro_batches = {}  # step -> micro-batches recorded so far
        self._layer = 0
        self._captures = []
        self._depth = 0  # > 0 inside a captured call: nested attention calls are not layers
        self._layer_inputs = {}  # x and wq for the next attention call
        self._metadata = {}  # the step's own metadata

    @property
    def capturing(self):
        """True inside dump.step(step) for a step that is captured."""
        return self._step is not None

    def layer_inputs(self, **tensors):
        """Tensors (x, wq) saved with the next attention call of this step."""
        if self.capturing and not _in_backward():
            self._layer_inputs = {name: t.detach().clone() for name, t in tensors.items()}

    # -- public -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, step, metadata=None, micro_batch=None):
        """Counts the attention calls of one training step and writes what it captured, with
        `metadata` ({key: value}, e.g. the text and window a model read) in every file.
        micro_batch: the first micro-batch inside (default: the next of this step)."""
        if self.steps is not None and step not in self.steps:
            yield self
            return
        if micro_batch is not None and (isinstance(micro_batch, bool) or not isinstance(micro_batch, int)
                                        or micro_batch < 0):
            raise ValueError(f"micro_batch: must be an integer from 0, not {micro_batch!r}")
        self._step, self._layer, self._captures, self._layer_inputs = step, 0, [], {}
        self._micro_batch = self._micro_batches.get(step, 0) if micro_batch is None else micro_batch
        self._backward_seen = False
        self._metadata = dict(metadata or {})
        original = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = self.wrap(original, kind="sdpa")
        try:
            yield self
        except BaseException:
            # a step stopped half-way (an error, Ctrl-C in the backward pass): what it captured is
            # not the step (forward without backward), so nothing of it is written
            self._captures = []
            raise
        else:
            if not self._captures and self._layer == 0:
                warnings.warn(f"roundscope.dump: step {step} called no scaled_dot_product_attention: nothing to dump "
                              "(nn.MultiheadAttention with need_weights=True, its default, computes attention "
                              "without it; wrap other kernels with dump.wrap)", stacklevel=3)
        finally:
            F.scaled_dot_product_attention = original
            os.makedirs(self.directory, exist_ok=True)
            for c in self._captures:
                micro = int(c.metadata["micro_batch"])
                name = f"step{step}_layer{c.layer}" if micro == 0 else f"step{step}_mb{micro}_layer{c.layer}"
                path = os.path.join(self.directory, name + ".safetensors")
                write_safetensors(path, c.tensors, c.metadata, self.writer)
                self.written.append(path)
            self._micro_batches[step] = self._micro_batch + 1
            self._step, self._captures = None, []

    def wrap(self, attention, kind="custom", positional=(), causal_alignment="bottom-right"):
        """attention(q, k, v, ...) -> o, captured like scaled_dot_product_attention. Keyword
        arguments ending in 'descale' (descale_q, q_descale, ...) are saved as FP8 descale
        factors; 'is_causal'/'causal', 'scale'/'softmax_scale', FlashAttention's 'window_size'
        (left, right) and 'softcap' as metadata, 'attn_mask' as a tensor. `positional` names the
        arguments after q, k, v in order, for a function that takes them so. causal_alignment:
        where the kernel puts the causal diagonal when Nq != Nk, "bottom-right" (FlashAttention's)
        or "top-left" (scaled_dot_product_attention's, which the step's own capture records)."""
        positional = tuple(positional)
        if causal_alignment not in ("bottom-right", "top-left"):
            raise ValueError(f"causal_alignment: {causal_alignment!r} is not 'bottom-right' or 'top-left'")

        def wrapped(q, k, v, *args, **kwargs):
            if self._step is None or self._depth > 0 or _in_backward():
                return attention(q, k, v, *args, **kwargs)
            if self._backward_seen:  # forward after backward: gradient accumulation's next micro-batch
                self._micro_batch, self._layer, self._backward_seen = self._micro_batch + 1, 0, False
            layer = self._layer
            self._layer += 1
            self._depth += 1
            emulation = _emulation()
            calls = None if emulation is None else emulation.emulated
            try:
                o = attention(q, k, v, *args, **kwargs)
            finally:
                self._depth -= 1
            # The call ran as a roundscope recipe where emulate counted it as emulated.
            recipe = self.recipe
            if recipe is None and emulation is not None and emulation.emulated > calls:
                recipe = (emulation.recipe, emulation.settings)
            out = o[0] if isinstance(o, tuple) else o
            if torch.is_tensor(out) and out.requires_grad:  # every call, captured or not, tells of backward
                out.register_hook(self._note_backward)
            extra, self._layer_inputs = self._layer_inputs, {}
            if self.layers is None or layer in self.layers:
                named = {**dict(zip(positional, args)), **kwargs}
                self._capture(layer, kind, q, k, v, o, args[len(positional):], named, recipe, causal_alignment)
                self._captures[-1].tensors.update(extra)
            return o

        # emulate entered inside dump.step rebinds the function: it keeps the capture around its own,
        # and reaches the function inside (roundscope_inner) for calls the capture must not see twice
        wrapped.roundscope_rewrap = lambda f: self.wrap(f, kind, positional, causal_alignment)
        wrapped.roundscope_inner = attention
        return wrapped

    # -- internals -------------------------------------------------------------------------------
    def _note_backward(self, grad):
        self._backward_seen = True
    def _capture(self, layer, kind, q, k, v, o, args, kwargs, recipe, causal_alignment):
        if kind == "sdpa":  # scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
            names = ["attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
            kwargs = {**dict(zip(names, args)), **kwargs}
            causal_alignment = "top-left"  # torch.ones(L, S).tril(): query i sees keys 0..i
        causal = bool(kwargs.get("is_causal", kwargs.get("causal", False)))
        scale = kwargs.get("scale", kwargs.get("softmax_scale"))
        if scale is None:
            scale = 1.0 / math.sqrt(q.shape[-1])
        out = o[0] if isinstance(o, tuple) else o
        tensors = {"q": q.detach().clone(), "k": k.detach().clone(), "v": v.detach().clone(), "o": out.detach().clone()}
        metadata = {**self._metadata, "layer": layer, "step": self._step, "causal": "true" if causal else "false",
                    "causal_alignment": causal_alignment, "softmax_scale": repr(float(scale)),
                    "source": f"roundscope_dump ({kind})", "torch_version": torch.__version__,
                    "micro_batch": self._micro_batch}
        window = kwargs.get("window_size")
        if window is not None:  # FlashAttention's (left, right), -1 unbounded
            left, right = (int(x) for x in window)
            metadata["window_left"], metadata["window_right"] = str(left), str(right)
        softcap = kwargs.get("softcap")
        if softcap:
            metadata["softcap"] = repr(float(softcap))
        if recipe is not None:
            metadata["recipe"] = recipe[0]
            if recipe[1]:
                metadata["recipe_settings"] = json.dumps(recipe[1], sort_keys=True)
        if isinstance(o, tuple) and len(o) > 1 and torch.is_tensor(o[1]):
            tensors["lse"] = o[1].detach().clone()  # flash-attention kernels return (out, lse)
        mask = kwargs.get("attn_mask")
        if mask is not None:
            tensors["attn_mask"] = _compact_mask(mask.detach())
        dropout = float(kwargs.get("dropout_p", 0.0) or 0.0)
        if dropout:
            metadata["dropout_p"] = repr(dropout)
        if kwargs.get("enable_gqa"):
            metadata["enable_gqa"] = "true"
        for key, value in kwargs.items():
            if key.endswith("descale") or key.startswith("descale"):
                if torch.is_tensor(value):
                    tensors[key] = value.detach().clone()
                    if value.numel() == 1:
                        metadata[key] = repr(float(value.float()))
                elif value is not None:
                    metadata[key] = repr(float(value))
        capture = _Capture(layer, tensors, metadata)
        # The backward pass's do, and the kernel's own dq, dk, dv (what `roundscope compare`
        # checks), as they arrive.
        for name, tensor in (("do", out), ("dq", q), ("dk", k), ("dv", v)):
            if tensor.requires_grad:
                def keep_gradient(grad, capture=capture, name=name):
                    capture.tensors[name] = grad.detach().clone()
                tensor.register_hook(keep_gradient)
        self._captures.append(capture)
