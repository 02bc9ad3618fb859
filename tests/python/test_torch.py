"""roundscope.torch: forward and gradients equal `roundscope attention --backward` bit for bit;
training with it is deterministic on any thread count."""
import numpy as np
import pytest
import torch

import roundscope as rs
import roundscope.torch as rst
from files_by_hand import same_bits


def as_format(t, like):
    """A torch result as numpy in the format of the CLI's array `like` (exact: widened from it)."""
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.detach().numpy().astype(like.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("recipe,causal", [("fa2-bf16", True), ("fa3-fp8", False), ("mxfp4-v-fixed", True),
                                           ("fa2-bf16-torch", False)])
def test_forward_and_gradients_equal_cli(cli, tmp_path, dtype, recipe, causal):
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(2, 2, 48, 32, generator=g).to(dtype) for _ in range(4))
    rs.write(tmp_path / "x.safetensors", {"q": q, "k": k, "v": v, "do": do})
    cli.run("attention", tmp_path / "x.safetensors", "--recipe", recipe, "--backward",
            "--causal" if causal else "--no-causal", "-o", tmp_path / "o.safetensors")
    want = rs.read(tmp_path / "o.safetensors")
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    o = rst.scaled_dot_product_attention(q, k, v, is_causal=causal, recipe=recipe)
    assert o.dtype == dtype
    o.backward(do)
    assert same_bits(as_format(o, want["o"]), want["o"])
    for name, x in (("dq", q), ("dk", k), ("dv", v)):
        assert same_bits(as_format(x.grad, want[name]), want[name]), name


def test_gqa_repeats_key_heads_and_sums_their_gradients():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 32, 16, generator=g, requires_grad=True)
    k, v = (torch.randn(1, 2, 32, 16, generator=g, requires_grad=True) for _ in range(2))
    o = rst.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    expanded = [x.detach().repeat_interleave(2, dim=1).requires_grad_() for x in (k, v)]
    o2 = rst.scaled_dot_product_attention(q.detach(), *expanded)
    assert torch.equal(o, o2)
    o.sum().backward()
    o2.sum().backward()
    assert torch.equal(k.grad, expanded[0].grad.reshape(1, 2, 2, 32, 16).sum(2))


def test_refuses_what_the_kernels_do_not_do():
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="attn_mask"):
        rst.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(8, 8))
    with pytest.raises(ValueError, match="dropout_p"):
        rst.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="top-left"):
        rst.scaled_dot_product_attention(q, torch.randn(1, 1, 12, 16), torch.randn(1, 1, 12, 16), is_causal=True)
    with pytest.raises(ValueError, match="recipe"):
        rst.scaled_dot_product_attention(q, q, q, recipe="fa9")


class Tiny(torch.nn.Module):
    """One attention layer over token embeddings, predicting the next token."""

    def __init__(self, attention, vocab=32, width=32, heads=2):
        super().__init__()
        self.attention, self.heads = attention, heads
        self.embed = torch.nn.Embedding(vocab, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        b, n = tokens.shape
        x = self.embed(tokens)
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = self.attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, -1)
        return self.out(x + y)


def train(threads, steps=20):
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    model = Tiny(rst.sdpa(recipe="fa2-bf16", threads=threads))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.randint(0, 32, (4, 33), generator=torch.Generator().manual_seed(3))
    losses = []
    for _ in range(steps):
        logits = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_training_is_deterministic_on_one_and_two_threads():
    first = train(1)
    assert first[-1] < first[0]  # it learns
    assert train(1) == first
    assert train(2) == first
