"""`roundscope truth` beside PyTorch in float64: scaled_dot_product_attention's math backend and
its autograd gradients, on bf16 inputs with 2 heads, causal and not, without and with an additive
bias (ALiBi slopes with -inf masks; one [N, N] for all heads in bf16, or one per head in f32). The
truth is the exact result rounded once; float64 PyTorch must lie within its own error bound of it
(a few thousand ulps at these sizes), and the truth's files must hold what CLI.md promises."""

import pytest
import torch
from safetensors.torch import load_file, save_file


def make_bias(kind, generator):
    """None, or an ALiBi-like bias with 15 % of the off-diagonal keys masked by -inf."""
    if kind is None:
        return None
    distance = (torch.arange(48)[:, None] - torch.arange(48)[None, :]).abs().double()
    slopes = torch.tensor([0.5, 0.125]).double()[:, None, None]
    bias = -slopes * distance
    mask = (torch.rand(48, 48, generator=generator) < 0.15) & ~torch.eye(48, dtype=torch.bool)  # no row loses every key
    bias = bias.masked_fill(mask, float("-inf"))
    return bias[0].bfloat16() if kind == "shared" else bias.float()


@pytest.mark.parametrize("bias_kind", [None, "shared", "per_head"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_truth_bounds_float64_pytorch(cli, tmp_path, causal, bias_kind):
    g = torch.Generator().manual_seed(7)
    q, k, v, do = (torch.randn(2, 48, 16, generator=g).bfloat16() for _ in range(4))
    bias = make_bias(bias_kind, g)
    tensors = {"q": q, "k": k, "v": v, "do": do}
    if bias is not None:
        tensors["bias"] = bias
    save_file(tensors, tmp_path / "in.safetensors", metadata={"causal": str(causal).lower()})
    info = cli.json("truth", tmp_path / "in.safetensors", "--backward", "-o", tmp_path / "truth.safetensors")
    assert info["tensors"] == ["o", "lse", "delta", "dq", "dk", "dv"]
    assert info["bias"] == (bias is not None), "the JSON says whether a bias was applied"
    t = load_file(tmp_path / "truth.safetensors")
    assert all(x.dtype == torch.float64 for x in t.values())
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    mask = torch.zeros(48, 48, dtype=torch.float64)
    if causal:
        mask = mask.masked_fill(torch.ones(48, 48, dtype=torch.bool).triu(1), float("-inf"))
    if bias is not None:
        mask = mask + bias.double()
    o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=info["softmax_scale"])
    o64.backward(do.double())
    lse64 = torch.logsumexp((q64 @ k64.transpose(-1, -2)) * info["softmax_scale"] + mask, -1)
    delta64 = (do.double() * o64).sum(-1)
    for name, ref in (("o", o64), ("lse", lse64), ("delta", delta64), ("dq", q64.grad), ("dk", k64.grad),
                      ("dv", v64.grad)):
        got = t[name]
        assert tuple(got.shape) == tuple(ref.shape), name
        err_max = (got - ref.detach()).abs().max().item()
        assert err_max <= 1e-12 * max(ref.detach().abs().max().item(), 1.0), f"{name}: max error {err_max:.3e}"


def test_bad_input_gets_one_line(cli, tmp_path):
    def file(name, **tensors):
        save_file({k: t.clone() for k, t in tensors.items()}, tmp_path / name)  # safetensors refuses shared storage
        return tmp_path / name

    ones = torch.ones(48, 8).bfloat16()
    x = tmp_path / "x.safetensors"
    assert "--bits" in cli.error("truth", file("in.safetensors", q=ones, k=ones, v=ones), "-o", x, "--bits", "4")
    nan_q = torch.full((48, 8), float("nan")).bfloat16()
    m = cli.error("truth", file("nan.safetensors", q=nan_q, k=ones, v=ones), "-o", x)
    assert "'q'" in m and "NaN" in m, m
    assert "do" in cli.error("truth", file("nodo.safetensors", q=ones, k=ones, v=ones), "--backward", "-o", x)
    bad_bias = make_bias("shared", torch.Generator().manual_seed(7))
    bad_bias[3, 5] = float("nan")
    m = cli.error("truth", file("nanbias.safetensors", q=ones, k=ones, v=ones, bias=bad_bias), "-o", x)
    assert all(s in m for s in ("nanbias.safetensors", "'bias'", "NaN")), m
    m = cli.error("truth", file("shapebias.safetensors", q=ones, k=ones, v=ones, bias=torch.zeros(48, 47)), "-o", x)
    assert "'bias'" in m and "[48, 47]" in m, m


# ---- every mask kind, grouped-query attention, soft-capping and every input dtype ---------------

B, H, NQ, NK, D = 2, 6, 24, 40, 16


def band_mask(nq, nk, causal, top_left, left, right):
    """The causal mask and window as an additive float64 mask, by their definitions
    (emu/attention/inputs/attention_mask.hpp): the diagonal key of row i is i (top-left, PyTorch's
    is_causal) or i + nk - nq (bottom-right, FlashAttention's)."""
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    p = i if top_left else i + nk - nq
    keep = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        keep &= j <= p
    if right >= 0:
        keep &= j <= p + right
    if left >= 0:
        keep &= j >= p - left
    return torch.zeros(nq, nk, dtype=torch.float64).masked_fill(~keep, float("-inf"))


def mask_case(kind, g):
    """(attn_mask tensor or None, metadata, the whole additive float64 mask [B, H, NQ, NK])."""
    meta, dense = {}, None
    if kind == "padding":  # key padding as transformers gives it for a right-padded batch, causal
        lengths = torch.tensor([NK, NK - 11])
        dense = (torch.arange(NK)[None, :] < lengths[:, None])[:, None, None, :]  # [B, 1, 1, NK] bool
        meta = {"causal": "true"}
    elif kind == "boolean":  # a boolean mask per head, no row without a key
        dense = torch.rand(B, H, NQ, NK, generator=g) > 0.3
        dense[..., 0] = True
    elif kind == "additive":  # float32 [1, H, NQ, NK] with -inf, bottom-right causal
        dense = (torch.randn(1, H, NQ, NK, generator=g) * 2).float()
        dense = dense.masked_fill(torch.rand(1, H, NQ, NK, generator=g) < 0.1, float("-inf"))
        dense[..., 0] = 0.5
        meta = {"causal": "true"}
    elif kind == "top-left":
        meta = {"causal": "true", "causal_alignment": "top-left"}
    elif kind == "window":
        meta = {"window_left": "7", "window_right": "2"}
    elif kind == "softcap":
        meta = {"causal": "true", "softcap": "2.5"}
    whole = band_mask(NQ, NK, meta.get("causal") == "true", meta.get("causal_alignment") == "top-left",
                      int(meta.get("window_left", -1)), int(meta.get("window_right", -1))).expand(B, H, NQ, NK)
    if dense is not None:
        if dense.dtype == torch.bool:
            add = torch.zeros(dense.shape, dtype=torch.float64).masked_fill(~dense, float("-inf"))
        else:
            add = dense.double()
        whole = whole + add
    return dense, meta, whole


def reference(q, k, v, do, mask, scale, softcap, g):
    """float64 PyTorch: scaled_dot_product_attention's math backend (enable_gqa), or with a soft cap
    the same written out (Gemma 2's order: scale, cap, mask), and autograd's gradients."""
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    kr, vr = (x.repeat_interleave(g, dim=1) for x in (k64, v64))
    s = (q64 @ kr.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
        s = s + mask
        o64 = torch.softmax(s, -1) @ vr
    else:
        s = s + mask
        o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=scale,
                                                               enable_gqa=g > 1)
    o64.backward(do.double())
    lse64 = torch.logsumexp(s, -1)
    return {"o": o64, "lse": lse64, "delta": (do.double() * o64).sum(-1), "dq": q64.grad, "dk": k64.grad,
            "dv": v64.grad}


@pytest.mark.parametrize("group", [1, 3, H])
@pytest.mark.parametrize("kind", ["padding", "boolean", "additive", "top-left", "window", "softcap"])
def test_every_mask_kind_and_head_group_against_float64_pytorch(cli, tmp_path, kind, group):
    g = torch.Generator().manual_seed(11)
    q, do = (torch.randn(B, H, NQ, D, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(B, H // group, NK, D, generator=g).bfloat16() for _ in range(2))
    dense, meta, whole = mask_case(kind, g)
    tensors = {"q": q, "k": k, "v": v, "do": do}
    if dense is not None:
        tensors["attn_mask"] = dense
    meta = {**meta, "enable_gqa": "true" if group > 1 else "false"}
    save_file(tensors, tmp_path / "in.safetensors", metadata=meta)
    info = cli.json("truth", tmp_path / "in.safetensors", "--backward", "-o", tmp_path / "truth.safetensors")
    assert info["kv_heads"] == B * H // group
    t = load_file(tmp_path / "truth.safetensors")
    ref = reference(q, k, v, do, whole, info["softmax_scale"], float(meta.get("softcap", 0)), group)
    for name, want in ref.items():
        got, want = t[name], want.detach()
        assert tuple(got.shape) == tuple(want.shape), name
        finite = torch.isfinite(want)
        assert torch.equal(torch.isfinite(got), finite), name
        err = (got[finite] - want[finite]).abs().max().item()
        assert err <= 1e-12 * max(want[finite].abs().max().item(), 1.0), f"{kind}, group {group}, {name}: {err:.3e}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_every_input_dtype_against_float64_pytorch(cli, tmp_path, dtype):
    g = torch.Generator().manual_seed(5)
    q, do = (torch.randn(B, H, NQ, D, generator=g).to(dtype) for _ in range(2))
    k, v = (torch.randn(B, H, NK, D, generator=g).to(dtype) for _ in range(2))
    dense, meta, whole = mask_case("padding", g)
    save_file({"q": q, "k": k, "v": v, "do": do, "attn_mask": dense}, tmp_path / "in.safetensors", metadata=meta)
    info = cli.json("truth", tmp_path / "in.safetensors", "--backward", "-o", tmp_path / "truth.safetensors")
    t = load_file(tmp_path / "truth.safetensors")
    for name, want in reference(q, k, v, do, whole, info["softmax_scale"], 0, 1).items():
        want = want.detach()
        err = (t[name] - want).abs().max().item()
        assert err <= 1e-12 * max(want.abs().max().item(), 1.0), f"{dtype}, {name}: {err:.3e}"


def test_a_row_without_keys_is_what_the_math_backend_gives(cli, tmp_path):
    """PyTorch's math backend (2.5 and later: _safe_softmax) gives a fully masked row O = 0 and zero
    gradients; the truth gives the same, and LSE = -inf."""
    g = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, 8, 16, generator=g).bfloat16() for _ in range(4))
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    mask[..., 3, :] = False
    save_file({"q": q, "k": k, "v": v, "do": do, "attn_mask": mask}, tmp_path / "in.safetensors")
    info = cli.json("truth", tmp_path / "in.safetensors", "--backward", "-o", tmp_path / "truth.safetensors")
    t = load_file(tmp_path / "truth.safetensors")
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=info["softmax_scale"])
    o64.backward(do.double())
    assert torch.equal(o64[..., 3, :], torch.zeros(1, 2, 16, dtype=torch.float64))
    assert torch.equal(t["o"][..., 3, :], o64[..., 3, :].detach())
    assert torch.equal(t["dq"][..., 3, :], q64.grad[..., 3, :])
    assert (t["lse"][..., 3] == float("-inf")).all()
