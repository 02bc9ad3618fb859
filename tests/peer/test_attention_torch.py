"""`roundscope attention` and `roundscope recipes` beside PyTorch: the emulated fa2-bf16 and
fa3-fp8 outputs lie within their recipes' rounding error of PyTorch's float64 SDPA and autograd,
the --truth errors agree with those measured here, the files carry the recipe, the bits do not
depend on --threads, and bad input gives one-line errors.

Usage: test_attention_torch.py ROUNDSCOPE"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))  # cli_harness
from cli_harness import check, finish, one_line_error, run

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope_attention_")
torch.manual_seed(11)


def path(name):
    return os.path.join(TMP, name)


rc, stdout, err = run(BINARY, "recipes", "--json")
recipes = json.loads(stdout)["recipes"] if rc == 0 else []
names = [r["name"] for r in recipes]
check("recipes lists the presets", {"fa2-bf16", "fa3-bf16", "fa3-fp8", "fp8-forward-order", "mxfp4-v", "mxfp4-v-fixed",
                                    "naive-f32", "naive-f16"} <= set(names), stdout)
check("fa3-fp8 settings", any(r["name"] == "fa3-fp8" and r["settings"]["p_scale"] == "256" and r["settings"]["kv_order"] == "reverse"
                              for r in recipes), stdout)

q, k, v, do = (torch.randn(2, 96, 64).bfloat16() for _ in range(4))
save_file({"q": q, "k": k, "v": v, "do": do}, path("in.safetensors"), metadata={"causal": "true"})
q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True)
o64.backward(do.double())


def rel_rms(x, ref):
    return ((x.double() - ref.detach()) ** 2).sum().sqrt().item() / (ref.detach() ** 2).sum().sqrt().item()


for recipe, o_bound in (("fa2-bf16", 2 ** -8), ("fa3-fp8", 2 ** -5)):
    out = path(f"{recipe}.safetensors")
    rc, stdout, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", recipe, "--backward", "--truth", "-o", out, "--json")
    check(f"{recipe} runs", rc == 0, err)
    if rc != 0:
        continue
    info = json.loads(stdout)
    t = load_file(out)
    check(f"{recipe}: outputs", sorted(t) == ["delta", "dk", "dq", "dv", "lse", "o"], sorted(t))
    check(f"{recipe}: O is bf16", t["o"].dtype == torch.bfloat16)
    # fa3-fp8 rounds q, k, v to E4M3 first: its error includes that rounding
    check(f"{recipe}: O within its bound of float64 SDPA", rel_rms(t["o"], o64) <= o_bound * (8 if recipe == "fa3-fp8" else 1),
          f"{rel_rms(t['o'], o64):.3e}")
    if recipe == "fa2-bf16":
        for name, ref in (("dq", q64.grad), ("dk", k64.grad), ("dv", v64.grad)):
            check(f"{recipe}: {name} within 2^-7 of autograd", rel_rms(t[name], ref) <= 2 ** -7, f"{rel_rms(t[name], ref):.3e}")
        check("--truth's O error equals the one measured here", abs(info["errors"]["o"]["rel_rms"] - rel_rms(t["o"], o64)) <= 1e-9,
              f"{info['errors']['o']} vs {rel_rms(t['o'], o64)}")
    check(f"{recipe}: errors for every output", set(info["errors"]) == {"o", "lse", "delta", "dq", "dk", "dv"}, stdout)

# The same bits on one thread and on two.
rc1, _, _ = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--backward", "-o", path("t1.safetensors"), "--threads", "1")
rc2, _, _ = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--backward", "-o", path("t2.safetensors"), "--threads", "2")
check("--threads 1 and 2 write the same bytes", rc1 == rc2 == 0 and open(path("t1.safetensors"), "rb").read() == open(path("t2.safetensors"), "rb").read())
meta = json.loads(open(path("t1.safetensors"), "rb").read()[8:8 + int.from_bytes(open(path("t1.safetensors"), "rb").read()[:8], "little")])["__metadata__"]
check("the file records the recipe", meta["recipe"] == "fa2-bf16" and json.loads(meta["recipe_settings"])["kv_order"] == "forward", meta)
rc, stdout, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--set", "kv_order=reverse", "-o", path("r.safetensors"), "--json")
check("--set changes the recipe", rc == 0 and json.loads(stdout)["settings"]["kv_order"] == "reverse", err)

# Bad input: one line, exit 2, naming what is wrong.
rc, _, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa9", "-o", path("x.safetensors"))
check("unknown recipe", one_line_error(rc, err, "fa9"), err)
rc, _, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--set", "kv_order=sideways", "-o", path("x.safetensors"))
check("bad --set value", one_line_error(rc, err, "kv_order", "sideways"), err)
rc, _, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--set", "colour=red", "-o", path("x.safetensors"))
check("unknown --set key", one_line_error(rc, err, "colour"), err)
save_file({"q": torch.full((8, 16), float("nan")).bfloat16(), "k": torch.ones(8, 16).bfloat16(), "v": torch.ones(8, 16).bfloat16()}, path("nan.safetensors"))
rc, _, err = run(BINARY, "attention", path("nan.safetensors"), "--recipe", "fa2-bf16", "-o", path("x.safetensors"))
check("NaN-filled q", one_line_error(rc, err, "nan.safetensors", "'q'", "NaN"), err)
save_file({"q": q[0], "k": k[0], "v": v[0]}, path("nodo.safetensors"))
rc, _, err = run(BINARY, "attention", path("nodo.safetensors"), "--recipe", "fa2-bf16", "--backward", "-o", path("x.safetensors"))
check("--backward without do", one_line_error(rc, err, "'do'"), err)
save_file({"q": q[0], "k": k[0], "v": v[0], "bias": torch.zeros(96, 96)}, path("bias.safetensors"))
rc, _, err = run(BINARY, "attention", path("bias.safetensors"), "--recipe", "fa2-bf16", "-o", path("x.safetensors"))
check("a bias is refused", one_line_error(rc, err, "'bias'"), err)
# fa2-bf16-torch is Qiu & Yao's released flash attention (attention.py under BF16 autocast) step
# for step: the same forward written here with every dtype autocast gives it, products in
# float64 on both sides (--set score_product=f64 pv_product=f64, where only their rounding to
# float32 and then BF16 is left), must give the same O bits, with and without the max
# adjustment (the code's STABLE=1), causal and not, over several 64 x 64 blocks.
def paper_forward(q, k, v, causal, block, stable):
    bf, f32 = torch.bfloat16, torch.float32
    neg = -torch.finfo(bf).max
    n, d = q.shape[-2], q.shape[-1]
    scale = torch.tensor(d ** -0.5, dtype=f32)
    o = torch.zeros_like(q)
    sums = torch.zeros(*q.shape[:-1], 1, dtype=bf)
    maxes = torch.full((*q.shape[:-1], 1), neg, dtype=bf)
    for r0 in range(0, n, block):
        qc, rows = q[..., r0:r0 + block, :], slice(r0, r0 + block)
        for c0 in range(0, n, block):
            kc, vc = k[..., c0:c0 + block, :], v[..., c0:c0 + block, :]
            s = (qc.double() @ kc.double().transpose(-1, -2)).float().to(bf)
            s = (s.float() * scale).to(bf)
            if causal:
                i = torch.arange(r0, r0 + qc.shape[-2]).unsqueeze(-1)
                j = torch.arange(c0, c0 + kc.shape[-2]).unsqueeze(0)
                s = s.masked_fill(j > i, neg)
            mb = s.amax(dim=-1, keepdim=True)
            if stable:
                near = (s >= (mb.float() - torch.tensor(1e-3, dtype=f32)).to(bf)).sum(dim=-1, keepdim=True) > 1
                mb = torch.where(near & (mb > 0), (mb.float() * 2).to(bf), mb)
                mb = torch.where(near & (mb < 0), torch.zeros_like(mb), mb)
            m_old = maxes[..., rows, :]
            m_new = torch.maximum(mb, m_old)
            p = torch.exp((s.float() - m_new.float()).to(bf).double()).float()
            block_sum = p.double().sum(dim=-1, keepdim=True).float().clamp(min=1e-10)
            pv = (p.to(bf).double() @ vc.double()).float().to(bf)
            factor = torch.exp((m_old.float() - m_new.float()).to(bf).double()).float()
            sums[..., rows, :] = (factor * sums[..., rows, :].float() + block_sum).to(bf)
            o[..., rows, :] = ((o[..., rows, :].float() * factor).to(bf).float() + pv.float()).to(bf)
            maxes[..., rows, :] = m_new
    return (o.float() / sums.float()).to(bf)


qp, kp, vp = (torch.randn(2, 160, 32).bfloat16() for _ in range(3))
kp[:, 7] = kp[:, 3]  # two keys tie for many rows' max: P-bar = 1 twice, what the max adjustment acts on
qp[:, :, 0] = 3.0
kp[:, 3, 0] = kp[:, 7, 0] = 4.0
for causal in (False, True):
    for stable in (False, True):
        save_file({"q": qp, "k": kp, "v": vp}, path("paper.safetensors"), metadata={"causal": "true" if causal else "false"})
        args = ["attention", path("paper.safetensors"), "--recipe", "fa2-bf16-torch", "--set", "score_product=f64", "--set", "pv_product=f64",
                "--set", "block_m=64", "--set", "block_n=64", "--set", f"max_adjust={'on' if stable else 'off'}", "-o", path("paper_o.safetensors")]
        rc, _, err = run(BINARY, *args)
        ours = load_file(path("paper_o.safetensors"))["o"] if rc == 0 else None
        theirs = paper_forward(qp, kp, vp, causal, 64, stable)
        same = ours is not None and torch.equal(ours.view(torch.int16), theirs.view(torch.int16))
        differing = -1 if ours is None else int((ours.view(torch.int16) != theirs.view(torch.int16)).sum())
        check(f"fa2-bf16-torch = the released code's forward, causal {causal}, STABLE {stable}", same, f"{differing} of {theirs.numel()} differ {err}")
# its backward's D = (dO * O).sum(-1) as the released code runs it (train.py's compile = True:
# the backward traced under autocast, where sum autocasts to float32): PyTorch's Inductor,
# given the same graph (the BF16 product, then float32), keeps the product exact, so D is the
# float32 sum of exact products; the recipe's sequential sum and Inductor's vector reduction
# may round differently in the last places, but rounding each product to BF16 (the eager
# graph's dtypes) is thousands of float32 ulps away.
dop = torch.randn(2, 160, 32).bfloat16()
save_file({"q": qp, "k": kp, "v": vp, "do": dop}, path("paper.safetensors"))
rc, _, err = run(BINARY, "attention", path("paper.safetensors"), "--recipe", "fa2-bf16-torch", "--backward", "-o", path("paper_b.safetensors"))
if rc == 0:
    out = load_file(path("paper_b.safetensors"))
    compiled = torch.compile(lambda d_o, o: (d_o * o).float().sum(dim=-1))(dop, out["o"])
    magnitude = (dop.double() * out["o"].double()).abs().sum(dim=-1)
    ulps = ((out["delta"].double() - compiled.double()).abs() / (magnitude * 2.0 ** -24)).max().item()
    eager = (dop * out["o"]).float().sum(dim=-1)
    eager_ulps = ((eager.double() - compiled.double()).abs() / (magnitude * 2.0 ** -24)).max().item()
    check("fa2-bf16-torch: delta = the compiled (dO * O).sum() in float32, within float32 summation order",
          compiled.dtype == torch.float32 and ulps <= 64 and eager_ulps > 1000, f"{ulps} ulps of sum |dO O|; BF16 products {eager_ulps}")
else:
    check("fa2-bf16-torch --backward runs", False, err)

# `bias` with the layer input x and the query weight (q = x wq, fused [M, H * D]): dW^Q = x^T dQ
# from float64 autograd on q, k, v, dO as the kernel holds them (BF16 under fa2-bf16), the mean
# cosine of the rank-1 matrices x[T]^T (PK)[T] from Gram matrices, and the projection residual
# of the file's q, each per head against the JSON.
B, H, N, D, M = 2, 2, 48, 16, 24
x = torch.randn(B, N, M)
wq = torch.randn(M, H * D) / M ** 0.5
qx = (x.double() @ wq.double()).float().view(B, N, H, D).transpose(1, 2).contiguous()
kx, vx, dox = (torch.randn(B, H, N, D) for _ in range(3))
save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x, "wq": wq}, path("layer.safetensors"), metadata={"causal": "true"})
rc, stdout, err = run(BINARY, "bias", path("layer.safetensors"), "--json")
check("bias with x and wq runs", rc == 0 and "query_weight" in json.loads(stdout), err)
if rc == 0:
    heads = json.loads(stdout)["query_weight"]["heads"]
    held = lambda t: t.bfloat16().double()
    q64 = held(qx).requires_grad_()
    o = torch.nn.functional.scaled_dot_product_attention(q64, held(kx), held(vx), is_causal=True)
    o.backward(held(dox))
    dwq = torch.einsum("bta,bhtj->ahj", x.double(), q64.grad)  # [M, H, D]
    mask = torch.ones(N, N, dtype=torch.bool).tril()
    p = torch.softmax((q64.detach() @ held(kx).transpose(-1, -2) / D ** 0.5).masked_fill(~mask, float("-inf")), dim=-1)
    pk = p @ held(kx)  # [B, H, N, D]
    for h in range(H):
        xs = torch.nn.functional.normalize(x.double().reshape(B * N, M), dim=1)
        ps = torch.nn.functional.normalize(pk[:, h].reshape(B * N, D), dim=1)
        pairs = (xs @ xs.T) * (ps @ ps.T)
        cosine = (pairs.sum() - pairs.diagonal().sum()).item() / (B * N * (B * N - 1))
        residual = ((qx[:, h].double() - x.double() @ wq[:, h * D:(h + 1) * D].double()).norm() / qx[:, h].double().norm()).item()
        got = heads[h]
        check(f"bias: head {h} |dW^Q| equals autograd's", abs(got["dwq_norm"] / dwq[:, h].norm().item() - 1) < 1e-9,
              f"{got['dwq_norm']} vs {dwq[:, h].norm().item()}")
        check(f"bias: head {h} rank-1 cosine equals the Gram matrices'", abs(got["rank1_cosine_similarity"] - cosine) < 1e-9,
              f"{got['rank1_cosine_similarity']} vs {cosine}")
        check(f"bias: head {h} projection residual", abs(got["q_projection_residual"] - residual) < 1e-9 and residual < 1e-6,
              f"{got['q_projection_residual']} vs {residual}")
save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x[:, :40].contiguous()}, path("short_x.safetensors"))
rc, _, err = run(BINARY, "bias", path("short_x.safetensors"))
check("bias: x of the wrong shape", one_line_error(rc, err, "short_x.safetensors", "'x'"), err)
save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x, "wq": torch.full_like(wq, float("nan"))}, path("nan_wq.safetensors"))
rc, _, err = run(BINARY, "bias", path("nan_wq.safetensors"))
check("bias: a NaN-filled wq", one_line_error(rc, err, "nan_wq.safetensors", "'wq'", "NaN"), err)

# crosscheck: bit-for-bit on a GPU (exit 0), one line and exit 3 without one (CI).
rc, stdout, err = run(BINARY, "crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--scenario", "sink", "--n", "80", "--json")
check("crosscheck: 0 with a GPU, 3 without", rc == 0 and json.loads(stdout)["matched"] == json.loads(stdout)["total"] or
      rc == 3 and err.startswith("roundscope: error: ") and err.count("\n") == 1, f"{rc} {err}")
rc, _, err = run(BINARY, "crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--scenario", "nope")
check("crosscheck: unknown scenario", one_line_error(rc, err, "--scenario", "nope"), err)
finish("test_attention_torch")
