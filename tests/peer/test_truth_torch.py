"""`roundscope truth` beside PyTorch in float64: scaled_dot_product_attention's math backend and
its autograd gradients, on bf16 inputs with 2 heads, causal and not, without and with an additive
bias (ALiBi slopes with -inf masks; one [N, N] for all heads in bf16, or one per head in f32). The
truth is the exact result rounded once; float64 PyTorch must lie within its own error bound of it
(a few thousand ulps at these sizes), and the truth's files must hold what CLI.md promises."""
import json

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
    for name, ref in (("o", o64), ("lse", lse64), ("delta", delta64), ("dq", q64.grad), ("dk", k64.grad), ("dv", v64.grad)):
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
    m = cli.error("truth", file("nan.safetensors", q=torch.full((48, 8), float("nan")).bfloat16(), k=ones, v=ones), "-o", x)
    assert "'q'" in m and "NaN" in m, m
    assert "do" in cli.error("truth", file("nodo.safetensors", q=ones, k=ones, v=ones), "--backward", "-o", x)
    bad_bias = make_bias("shared", torch.Generator().manual_seed(7))
    bad_bias[3, 5] = float("nan")
    m = cli.error("truth", file("nanbias.safetensors", q=ones, k=ones, v=ones, bias=bad_bias), "-o", x)
    assert all(s in m for s in ("nanbias.safetensors", "'bias'", "NaN")), m
    m = cli.error("truth", file("shapebias.safetensors", q=ones, k=ones, v=ones, bias=torch.zeros(48, 47)), "-o", x)
    assert "'bias'" in m and "[48, 47]" in m, m
