"""roundscope.torch: forward and gradients equal `roundscope attention --backward` bit for bit;
training with it is deterministic on any thread count."""
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


def test_gqa_reads_key_heads_by_group_and_sums_their_gradients_as_the_kernel_does():
    """Each key-value head serves its group of query heads (the same bits as the heads repeated);
    its gradient is the group's per-head gradients (BF16, fa2-bf16's grad_format) summed in
    float32 and rounded once to BF16, as FlashAttention-2's mha_bwd sums them."""
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, 32, 16, generator=g, requires_grad=True)
    k, v = (torch.randn(1, 2, 32, 16, generator=g, requires_grad=True) for _ in range(2))
    o = rst.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    expanded = [x.detach().repeat_interleave(2, dim=1).requires_grad_() for x in (k, v)]
    o2 = rst.scaled_dot_product_attention(q.detach(), *expanded)
    assert torch.equal(o, o2)
    o.sum().backward()
    o2.sum().backward()
    for grouped, repeated in ((k, expanded[0]), (v, expanded[1])):
        assert torch.equal(grouped.grad, repeated.grad.reshape(1, 2, 2, 32, 16).sum(2).bfloat16().float())


def test_refuses_what_the_kernels_do_not_do_and_takes_pytorchs_masks():
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="attn_mask: a mask that needs a gradient"):
        rst.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(8, 8, requires_grad=True))
    with pytest.raises(ValueError, match="dropout_p"):
        rst.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="recipe"):
        rst.scaled_dot_product_attention(q, q, q, recipe="fa9")
    # is_causal with Nq != Nk is PyTorch's top-left mask: query i sees keys 0..i
    k, v = torch.randn(1, 1, 12, 16), torch.randn(1, 1, 12, 16)
    tril = torch.ones(8, 12, dtype=torch.bool).tril()
    assert torch.equal(rst.scaled_dot_product_attention(q, k, v, is_causal=True),
                       rst.scaled_dot_product_attention(q, k, v, attn_mask=tril))
    assert not torch.equal(rst.scaled_dot_product_attention(q, k, v, is_causal=True),
                           rst.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(8, 12, dtype=torch.bool)
                                                            .tril(4)))


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


def _heads(seed, dtype=torch.float32, n=24):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 2, n, 16, generator=g).to(dtype).requires_grad_() for _ in range(3)]


def _grads(q, k, v, f):
    for x in (q, k, v):
        x.grad = None
    o = f(q, k, v)
    (o.float() * torch.linspace(-1, 1, o.shape[-1])).sum().backward()
    return [o.detach()] + [x.grad.clone() for x in (q, k, v)]


def _same(a, b):
    return all(x.dtype == y.dtype and torch.equal(x.view(torch.uint8) if x.dtype.itemsize == 1 else x, y)
               for x, y in zip(a, b))


@pytest.mark.parametrize("recipe", ["fa3-fp8", "fa2-bf16"])
def test_emulate_catches_every_call_and_equals_the_direct_call(recipe):
    """F.scaled_dot_product_attention, the function imported by name before the block, and
    nn.MultiheadAttention (whose F.multi_head_attention_forward PyTorch runs with modes off) all
    run the recipe's kernel in the block, forward and backward, with the bits of the direct call."""
    from torch.nn.functional import scaled_dot_product_attention as by_name
    q, k, v = _heads(11, torch.bfloat16)
    want = _grads(q, k, v, lambda *x: rst.scaled_dot_product_attention(*x, is_causal=True, recipe=recipe))
    exact = _grads(q, k, v, lambda *x: torch.nn.functional.scaled_dot_product_attention(*x, is_causal=True))
    assert not _same(want, exact)  # the recipe's rounding shows: the comparison below can fail
    with rst.emulate(recipe) as mode:
        assert _same(_grads(q, k, v, lambda *x: torch.nn.functional.scaled_dot_product_attention(*x, is_causal=True)),
                     want)
        assert _same(_grads(q, k, v, lambda *x: by_name(*x, is_causal=True)), want)
        mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        x = torch.randn(2, 24, 16, generator=torch.Generator().manual_seed(3))
        out, _ = mha(x, x, x, need_weights=False)
        out.sum().backward()
    assert mode.emulated == 3 and not mode.fallbacks
    assert torch.nn.functional.scaled_dot_product_attention is by_name  # rebound back on exit
    with torch.no_grad():
        direct = mha(x, x, x, need_weights=False)[0]
    assert not torch.equal(out.detach(), direct)  # outside the block: PyTorch's own kernel again


def test_emulate_fallbacks():
    q, k, v = _heads(12)
    mask = torch.rand(24, 24, generator=torch.Generator().manual_seed(1)) > 0.3
    mask.fill_diagonal_(True)
    f = torch.nn.functional.scaled_dot_product_attention
    with rst.emulate("fa3-fp8") as mode:  # a mask is the emulator's too
        got = _grads(q, k, v, lambda *x: f(*x, attn_mask=mask))
    assert mode.emulated == 1 and not mode.fallbacks
    assert _same(got, _grads(q, k, v,
                             lambda *x: rst.scaled_dot_product_attention(*x, attn_mask=mask, recipe="fa3-fp8")))
    bias = torch.randn(24, 24, generator=torch.Generator().manual_seed(2)).requires_grad_()  # a learned bias
    with rst.emulate("fa3-fp8") as mode:  # "exact": PyTorch's attention in float64, rounded once
        got = _grads(q, k, v, lambda *x: f(*x, attn_mask=bias))
    assert mode.emulated == 0 and mode.fallbacks == {"attn_mask": 1}
    want = _grads(q, k, v, lambda *x: f(*(t.double() for t in x), attn_mask=bias.double()).float())
    assert _same(got, want)
    with rst.emulate("fa3-fp8", fallback="torch") as mode:
        got = _grads(q, k, v, lambda *x: f(*x, attn_mask=bias))
    assert _same(got, _grads(q, k, v, lambda *x: f(*x, attn_mask=bias))) and mode.fallbacks == {"attn_mask": 1}
    with rst.emulate("fa3-fp8", fallback="error"), pytest.raises(ValueError, match=r"^roundscope.torch.emulate: "
                                                                                   r"attn_mask: "):
        f(q, k, v, attn_mask=bias)
    with rst.emulate("fa3-fp8", fallback="error") as mode:  # PyTorch's top-left mask where Nq != Nk
        f(q, k[..., :12, :], v[..., :12, :], is_causal=True)
    assert mode.emulated == 1
    assert torch.nn.functional.scaled_dot_product_attention is f  # rebound back after an exception too
    # nn.TransformerEncoderLayer at its default dropout trains: its attention goes to the fallback
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    with rst.emulate("fa2-bf16") as mode:
        layer(torch.randn(2, 10, 16)).sum().backward()
    assert mode.fallbacks == {"dropout_p": 1} and mode.emulated == 0
    layer.eval()
    with rst.emulate("fa2-bf16") as mode, torch.no_grad():
        layer(torch.randn(2, 10, 16))
    assert mode.emulated == 1 and not mode.fallbacks


def test_emulate_checks_its_arguments_on_entry():
    with pytest.raises(ValueError, match=r"^recipe: unknown recipe 'fa3-fp9'; did you mean 'fa3-fp8'\?"):
        rst.emulate("fa3-fp9")
    with pytest.raises(ValueError, match=r"^settings: unknown recipe key 'p_scal'; did you mean 'p_scale'\?"):
        rst.emulate("fa3-fp8", settings={"p_scal": 256})
    with pytest.raises(ValueError, match=r"^fallback: 'exac' is not one of exact, torch, error"):
        rst.emulate("fa3-fp8", fallback="exac")


def test_emulate_under_torch_compile_gives_the_eager_bits():
    q, k, v = _heads(13)
    f = torch.compile(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v) * 2)
    with rst.emulate("fa3-fp8") as mode:
        got = f(q, k, v)
    want = rst.scaled_dot_product_attention(q, k, v, recipe="fa3-fp8") * 2
    assert mode.emulated == 1 and torch.equal(got, want)


def test_emulate_is_scoped_to_its_thread_and_block_and_restores_exactly():
    """A plain call from another thread while a block runs is PyTorch's own; blocks re-enter and
    interleave across threads; the binding of F.scaled_dot_product_attention comes back exactly."""
    import threading

    f = torch.nn.functional.scaled_dot_product_attention
    q, k, v = _heads(14)
    plain = f(q, k, v)
    emulated = rst.scaled_dot_product_attention(q, k, v, recipe="fa3-fp8")
    assert not torch.equal(plain, emulated)
    entered, release, seen = threading.Event(), threading.Event(), {}

    def block():
        with rst.emulate("fa3-fp8") as mode:
            entered.set()
            release.wait(30)
            seen["inside"] = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        seen["mode"] = mode

    t = threading.Thread(target=block)
    t.start()
    entered.wait(30)
    seen["other thread"] = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # this thread: no block
    release.set()
    t.join(30)
    assert torch.equal(seen["other thread"], plain), "another thread's call is not emulated"
    assert torch.equal(seen["inside"], emulated) and seen["mode"].emulated == 1
    assert torch.nn.functional.scaled_dot_product_attention is f
    # re-entered, and nested with another recipe: the innermost block's, then back
    mode = rst.emulate("fa3-fp8")
    with mode:
        with mode:
            assert torch.equal(torch.nn.functional.scaled_dot_product_attention(q, k, v), emulated)
            with rst.emulate("fa2-bf16"):
                inner = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            assert torch.equal(inner, rst.scaled_dot_product_attention(q, k, v, recipe="fa2-bf16"))
        assert torch.equal(torch.nn.functional.scaled_dot_product_attention(q, k, v), emulated)
    assert torch.nn.functional.scaled_dot_product_attention is f and mode.emulated == 2
    # two threads' blocks left in the order they were not entered: restored once both have left
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with rst.emulate("fa2-bf16"):
            first_in.set()
            second_in.wait(30)
        first_out.set()

    def second():
        first_in.wait(30)
        with rst.emulate("fa3-fp8") as m:
            second_in.set()
            first_out.wait(30)
            seen["second"] = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        seen["second mode"] = m

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for x in threads:
        x.start()
    for x in threads:
        x.join(30)
    assert torch.equal(seen["second"], emulated) and seen["second mode"].emulated == 1
    assert torch.nn.functional.scaled_dot_product_attention is f
