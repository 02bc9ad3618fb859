"""`roundscope truth` beside PyTorch in float64: scaled_dot_product_attention's math backend and
its autograd gradients, on bf16 inputs with 2 heads, causal and not, without and with an additive
bias (ALiBi slopes with -inf masks; one [N, N] for all heads in bf16, or one per head in f32). The truth is the exact
result rounded once; float64 PyTorch must lie within its own error bound of it (a few thousand
ulps at these sizes), and the truth's files must hold what CLI.md promises.

Usage: test_truth_torch.py ROUNDSCOPE"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))  # cli_harness
from cli_harness import check, finish, one_line_error, run

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope_truth_")
torch.manual_seed(7)


def make_bias(kind):
    """None, or an ALiBi-like bias with 15 % of the off-diagonal keys masked by -inf."""
    if kind is None:
        return None
    distance = (torch.arange(48)[:, None] - torch.arange(48)[None, :]).abs().double()
    slopes = torch.tensor([0.5, 0.125]).double()[:, None, None]
    bias = -slopes * distance
    mask = (torch.rand(48, 48) < 0.15) & ~torch.eye(48, dtype=torch.bool)  # no row loses every key
    bias = bias.masked_fill(mask, float("-inf"))
    return bias[0].bfloat16() if kind == "shared" else bias.float()


for causal in (False, True):
    for bias_kind in (None, "shared", "per_head"):
        q, k, v, do = (torch.randn(2, 48, 16).bfloat16() for _ in range(4))
        bias = make_bias(bias_kind)
        src, out = os.path.join(TMP, "in.safetensors"), os.path.join(TMP, "truth.safetensors")
        tensors = {"q": q, "k": k, "v": v, "do": do}
        if bias is not None:
            tensors["bias"] = bias
        save_file(tensors, src, metadata={"causal": str(causal).lower()})
        rc, stdout, err = run(BINARY, "truth", src, "--backward", "-o", out, "--json")
        case = f"causal={causal}, bias={bias_kind}"
        check(f"truth runs ({case})", rc == 0, err)
        if rc != 0:
            continue
        info = json.loads(stdout)
        check("JSON names the tensors", info["tensors"] == ["o", "lse", "delta", "dq", "dk", "dv"], stdout)
        check("JSON says whether a bias was applied", info["bias"] == (bias is not None), stdout)
        t = load_file(out)
        q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
        mask = torch.zeros(48, 48, dtype=torch.float64)
        if causal:
            mask = mask.masked_fill(torch.ones(48, 48, dtype=torch.bool).triu(1), float("-inf"))
        if bias is not None:
            mask = mask + bias.double()
        o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=info["softmax_scale"])
        o64.backward(do.double())
        scores = (q64 @ k64.transpose(-1, -2)) * info["softmax_scale"] + mask
        lse64 = torch.logsumexp(scores, -1)
        delta64 = (do.double() * o64).sum(-1)
        for name, ref in (("o", o64), ("lse", lse64), ("delta", delta64), ("dq", q64.grad), ("dk", k64.grad), ("dv", v64.grad)):
            got = t[name]
            check(f"{name} shape", tuple(got.shape) == tuple(ref.shape), f"{tuple(got.shape)} vs {tuple(ref.shape)}")
            err_max = (got - ref.detach()).abs().max().item()
            scale = ref.detach().abs().max().item()
            check(f"{name} within float64's bound ({case})", err_max <= 1e-12 * max(scale, 1.0), f"max error {err_max:.3e}")
        check("dtype F64", all(x.dtype == torch.float64 for x in t.values()))

rc, _, err = run(BINARY, "truth", os.path.join(TMP, "in.safetensors"), "-o", os.path.join(TMP, "x.safetensors"), "--bits", "4")
check("--bits out of range", one_line_error(rc, err, "--bits"), err)
save_file({"q": torch.full((4, 8), float("nan")).bfloat16(), "k": torch.ones(4, 8).bfloat16(), "v": torch.ones(4, 8).bfloat16()},
          os.path.join(TMP, "nan.safetensors"))
rc, _, err = run(BINARY, "truth", os.path.join(TMP, "nan.safetensors"), "-o", os.path.join(TMP, "x.safetensors"))
check("NaN-filled q", one_line_error(rc, err, "'q'", "NaN"), err)
save_file({"q": torch.ones(4, 8).bfloat16(), "k": torch.ones(4, 8).bfloat16(), "v": torch.ones(4, 8).bfloat16()},
          os.path.join(TMP, "nodo.safetensors"))
rc, _, err = run(BINARY, "truth", os.path.join(TMP, "nodo.safetensors"), "--backward", "-o", os.path.join(TMP, "x.safetensors"))
check("--backward without do", one_line_error(rc, err, "do"), err)
bad_bias = make_bias("shared")
bad_bias[3, 5] = float("nan")
save_file({"q": torch.ones(48, 8).bfloat16(), "k": torch.ones(48, 8).bfloat16(), "v": torch.ones(48, 8).bfloat16(), "bias": bad_bias},
          os.path.join(TMP, "nanbias.safetensors"))
rc, _, err = run(BINARY, "truth", os.path.join(TMP, "nanbias.safetensors"), "-o", os.path.join(TMP, "x.safetensors"))
check("NaN in the bias", one_line_error(rc, err, "nanbias.safetensors", "'bias'", "NaN"), err)
save_file({"q": torch.ones(48, 8).bfloat16(), "k": torch.ones(48, 8).bfloat16(), "v": torch.ones(48, 8).bfloat16(),
           "bias": torch.zeros(48, 47)}, os.path.join(TMP, "shapebias.safetensors"))
rc, _, err = run(BINARY, "truth", os.path.join(TMP, "shapebias.safetensors"), "-o", os.path.join(TMP, "x.safetensors"))
check("bias of the wrong shape", one_line_error(rc, err, "'bias'", "[48, 47]"), err)
finish("test_truth_torch")
