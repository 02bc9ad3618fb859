"""`roundscope attention` and `roundscope recipes` beside PyTorch: the emulated fa2-bf16 and
fa3-fp8 outputs lie within their recipes' rounding error of PyTorch's float64 SDPA and autograd,
the --truth errors agree with those measured here, the files carry the recipe, the bits do not
depend on --threads, fa2-bf16-torch is the BF16-bias paper's released forward bit for bit (and
fa2-bf16-torch-compiled the same under torch.compile for one bucket; test_compiled_torch_buckets.py
past it), `bias`
with the layer input agrees with autograd, and bad input gives one-line errors."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from cpu_vectors import compiled_at, need
from files_by_hand import read_safetensors


def test_recipes_lists_the_presets(cli):
    recipes = cli.json("recipes")["recipes"]
    assert {"fa2-bf16", "fa3-bf16", "fa3-fp8", "fp8-forward-order", "mxfp4-v", "mxfp4-v-fixed", "naive-f32",
            "naive-f16"} <= {r["name"] for r in recipes}
    fp8 = next(r for r in recipes if r["name"] == "fa3-fp8")
    assert fp8["settings"]["p_scale"] == "256" and fp8["settings"]["kv_order"] == "reverse"


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A causal BF16 head with dO, written to in.safetensors, and float64 SDPA's O and gradients."""
    folder = tmp_path_factory.mktemp("attention")
    g = torch.Generator().manual_seed(11)
    q, k, v, do = (torch.randn(2, 96, 64, generator=g).bfloat16() for _ in range(4))
    save_file({"q": q, "k": k, "v": v, "do": do}, folder / "in.safetensors", metadata={"causal": "true"})
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True)
    o64.backward(do.double())
    return folder, {"o": o64.detach(), "dq": q64.grad, "dk": k64.grad, "dv": v64.grad}, (q, k, v)


def rel_rms(x, ref):
    return ((x.double() - ref) ** 2).sum().sqrt().item() / (ref ** 2).sum().sqrt().item()


# fa3-fp8 rounds q, k, v to E4M3 first: its error includes that rounding
@pytest.mark.parametrize("recipe, o_bound", [("fa2-bf16", 2**-8), ("fa3-fp8", 8 * 2**-5)])
def test_the_emulation_lies_within_its_bound_of_float64(cli, head, recipe, o_bound):
    folder, ref, _ = head
    out = folder / f"{recipe}.safetensors"
    info = cli.json("attention", folder / "in.safetensors", "--recipe", recipe, "--backward", "--truth", "-o", out)
    t = load_file(out)
    assert sorted(t) == ["delta", "dk", "dq", "dv", "lse", "o"] and t["o"].dtype == torch.bfloat16
    assert rel_rms(t["o"], ref["o"]) <= o_bound
    assert set(info["errors"]) == {"o", "lse", "delta", "dq", "dk", "dv"}
    if recipe == "fa2-bf16":
        for name in ("dq", "dk", "dv"):
            assert rel_rms(t[name], ref[name]) <= 2**-7, name
        assert abs(info["errors"]["o"]["rel_rms"] - rel_rms(t["o"], ref["o"])) <= 1e-9, "--truth's O error"


def test_the_bits_do_not_depend_on_threads_and_the_file_records_the_recipe(cli, head):
    folder = head[0]
    for threads in (1, 2):
        cli.run("attention", folder / "in.safetensors", "--recipe", "fa2-bf16", "--backward", "-o",
                folder / f"t{threads}.safetensors", "--threads", threads)
    assert (folder / "t1.safetensors").read_bytes() == (folder / "t2.safetensors").read_bytes()
    meta = read_safetensors(folder / "t1.safetensors")[1]
    assert meta["recipe"] == "fa2-bf16" and json.loads(meta["recipe_settings"])["kv_order"] == "forward", meta
    j = cli.json("attention", folder / "in.safetensors", "--recipe", "fa2-bf16", "--set", "kv_order=reverse", "-o",
                 folder / "r.safetensors")
    assert j["settings"]["kv_order"] == "reverse"


def test_bad_input_gets_one_line(cli, head, tmp_path):
    folder, _, (q, k, v) = head
    x = tmp_path / "x.safetensors"

    def attention(path, *args):
        return cli.error("attention", path, "--recipe", "fa2-bf16", *args, "-o", x)

    assert "fa9" in cli.error("attention", folder / "in.safetensors", "--recipe", "fa9", "-o", x)
    m = attention(folder / "in.safetensors", "--set", "kv_order=sideways")
    assert "kv_order" in m and "sideways" in m, m
    assert "colour" in attention(folder / "in.safetensors", "--set", "colour=red")
    save_file({"q": torch.full((8, 16), float("nan")).bfloat16(), "k": torch.ones(8, 16).bfloat16(),
               "v": torch.ones(8, 16).bfloat16()}, tmp_path / "nan.safetensors")
    m = attention(tmp_path / "nan.safetensors")
    assert all(s in m for s in ("nan.safetensors", "'q'", "NaN")), m
    save_file({"q": q[0].clone(), "k": k[0].clone(), "v": v[0].clone()}, tmp_path / "nodo.safetensors")
    assert "'do'" in attention(tmp_path / "nodo.safetensors", "--backward")
    save_file({"q": q[0].clone(), "k": k[0].clone(), "v": v[0].clone(), "bias": torch.full((96, 96), float("nan"))},
              tmp_path / "bias.safetensors")
    m = attention(tmp_path / "bias.safetensors")
    assert "'bias'" in m and "NaN" in m, m
    save_file({"q": q[0].clone(), "k": k[0].clone(), "v": v[0].clone(), "attn_mask": torch.rand(96, 96) > 0.5},
              tmp_path / "mask.safetensors")
    m = cli.error("attention", tmp_path / "mask.safetensors", "--recipe", "fa2-bf16-torch", "-o", x)
    assert "fa2-bf16-torch" in m and "causal mask" in m, m  # the released code takes its causal mask alone
    save_file({"q": q[0].clone(), "k": k[0].clone(), "v": v[0].clone(), "attn_mask": torch.zeros(96, 95)},
              tmp_path / "shape.safetensors")
    m = attention(tmp_path / "shape.safetensors")
    assert "'attn_mask'" in m and "[96, 95]" in m, m


@pytest.mark.parametrize("recipe", ["fa2-bf16", "fa3-fp8"])
@pytest.mark.parametrize("case", ["padding", "gqa-top-left", "window"])
def test_masked_and_grouped_attention_lies_within_rounding_of_float64_pytorch(cli, tmp_path, recipe, case):
    """A mask, grouped-query heads or a window in a dump: the emulated recipe's o and gradients
    lie as near float64 PyTorch (scaled_dot_product_attention with the same mask, enable_gqa) as
    without them, and dK, dV have the key-value heads' shape."""
    g = torch.Generator().manual_seed(21)
    b, h, n, d = 2, 4, 64, 32
    kv = 2 if case == "gqa-top-left" else h
    nq = 40 if case == "gqa-top-left" else n
    q, do = (torch.randn(b, h, nq, d, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(b, kv, n, d, generator=g).bfloat16() for _ in range(2))
    tensors, meta = {"q": q, "k": k, "v": v, "do": do}, {}
    i, j = torch.arange(nq)[:, None], torch.arange(n)[None, :]
    keep = torch.ones(b, h, nq, n, dtype=torch.bool)
    if case == "padding":
        pad = torch.arange(n)[None, :] < torch.tensor([n, 37])[:, None]
        tensors["attn_mask"] = pad[:, None, None, :]
        keep &= tensors["attn_mask"] & (j <= i)
        meta["causal"] = "true"
    elif case == "gqa-top-left":
        meta.update(causal="true", causal_alignment="top-left", enable_gqa="true")
        keep &= j <= i
    else:
        meta.update(window_left="9", window_right="3")
        keep &= (j >= i - 9) & (j <= i + 3)
    save_file(tensors, tmp_path / "in.safetensors", metadata=meta)
    info = cli.json("attention", tmp_path / "in.safetensors", "--recipe", recipe, "--backward", "--truth",
                    "-o", tmp_path / "out.safetensors")
    out = load_file(tmp_path / "out.safetensors")
    assert tuple(out["dk"].shape) == (b, kv, n, d) and tuple(out["dv"].shape) == (b, kv, n, d)

    def float64_pytorch(held):
        q64, k64, v64 = (x.to(held).double().requires_grad_() for x in (q, k, v))
        o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=keep, enable_gqa=kv != h)
        o64.backward(do.to(held).double())
        return {"o": o64.detach(), "dq": q64.grad, "dk": k64.grad, "dv": v64.grad}

    def relative_rms(got, want):
        return ((got.double() - want).norm() / want.norm()).item()

    # within the recipe's rounding of the inputs as its kernel holds them (BF16, or E4M3 for FP8):
    # below half the unit roundoff of its narrowest cast (BF16's 2^-8 and, for P, E4M3's 2^-4),
    # while the problem without the mask or window is far off
    held = torch.float8_e4m3fn if recipe == "fa3-fp8" else torch.bfloat16
    bound = {"fa2-bf16": 2 ** -8, "fa3-fp8": 2 ** -5}[recipe]
    for name, want in float64_pytorch(held).items():
        rel = relative_rms(out[name], want)
        assert rel <= 2 * bound if name != "o" else rel <= bound, f"{recipe} {case} {name}: relative rms {rel:.3e}"
    # the errors --truth reports are against the same masked problem, on the inputs as given
    for name, want in float64_pytorch(torch.bfloat16).items():
        assert info["errors"][name]["rel_rms"] == pytest.approx(relative_rms(out[name], want), rel=0.01), name
    keep = torch.ones_like(keep)
    unmasked = float64_pytorch(held)["o"]
    assert relative_rms(out["o"], unmasked) > 4 * bound, "the mask changes the problem"


# fa2-bf16-torch is Qiu & Yao's released flash attention (attention.py under BF16 autocast) step
# for step: the same forward written here with every dtype autocast gives it, products in
# float64 on both sides (--set score_product=f64 pv_product=f64, where only their rounding to
# float32 and then BF16 is left), must give the same O bits, with and without the max
# adjustment (the code's STABLE=1), causal and not, over several 64 x 64 blocks; and with the
# row sums held in float32 (recipe key row_sum_format=f32) where the code holds them in BF16.
def paper_forward(q, k, v, causal, block, stable, sum_dtype=torch.bfloat16):
    bf, f32 = torch.bfloat16, torch.float32
    neg = -torch.finfo(bf).max
    n, d = q.shape[-2], q.shape[-1]
    scale = torch.tensor(d ** -0.5, dtype=f32)
    o = torch.zeros_like(q)
    sums = torch.zeros(*q.shape[:-1], 1, dtype=sum_dtype)
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
            sums[..., rows, :] = (factor * sums[..., rows, :].float() + block_sum).to(sum_dtype)
            o[..., rows, :] = ((o[..., rows, :].float() * factor).to(bf).float() + pv.float()).to(bf)
            maxes[..., rows, :] = m_new
    return (o.float() / sums.float()).to(bf)


@pytest.fixture(scope="module")
def tied():
    """Two keys tie for many rows' max: P-bar = 1 twice, what the max adjustment acts on."""
    g = torch.Generator().manual_seed(12)
    qp, kp, vp = (torch.randn(2, 160, 32, generator=g).bfloat16() for _ in range(3))
    kp[:, 7] = kp[:, 3]
    qp[:, :, 0] = 3.0
    kp[:, 3, 0] = kp[:, 7, 0] = 4.0
    return qp, kp, vp, torch.randn(2, 160, 32, generator=g).bfloat16()


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_fa2_bf16_torch_is_the_released_forward(cli, tied, tmp_path, causal, stable):
    qp, kp, vp, _ = tied
    save_file({"q": qp, "k": kp, "v": vp}, tmp_path / "paper.safetensors", metadata={"causal": str(causal).lower()})
    cli.run("attention", tmp_path / "paper.safetensors", "--recipe", "fa2-bf16-torch", "--set", "score_product=f64",
            "--set", "pv_product=f64", "--set", "block_m=64", "--set", "block_n=64", "--set",
            f"max_adjust={'on' if stable else 'off'}", "-o", tmp_path / "paper_o.safetensors")
    ours = load_file(tmp_path / "paper_o.safetensors")["o"].view(torch.int16)
    theirs = paper_forward(qp, kp, vp, causal, 64, stable).view(torch.int16)
    assert torch.equal(ours, theirs), f"{int((ours != theirs).sum())} of {theirs.numel()} differ"


@pytest.mark.parametrize("causal", [False, True])
def test_fa2_bf16_torch_with_float32_row_sums_is_the_released_forward_so_changed(cli, tied, tmp_path, causal):
    qp, kp, vp, _ = tied
    save_file({"q": qp, "k": kp, "v": vp}, tmp_path / "paper.safetensors", metadata={"causal": str(causal).lower()})
    settings = ["score_product=f64", "pv_product=f64", "block_m=64", "block_n=64", "row_sum_format=f32"]
    cli.run("attention", tmp_path / "paper.safetensors", "--recipe", "fa2-bf16-torch",
            *[x for kv in settings for x in ("--set", kv)], "-o", tmp_path / "o.safetensors")
    ours = load_file(tmp_path / "o.safetensors")["o"].view(torch.int16)
    theirs = paper_forward(qp, kp, vp, causal, 64, False, torch.float32).view(torch.int16)
    assert torch.equal(ours, theirs), f"{int((ours != theirs).sum())} of {theirs.numel()} differ"
    released = paper_forward(qp, kp, vp, causal, 64, False).view(torch.int16)
    assert not torch.equal(ours, released), "the row sum's format must show in O"


def test_fa2_bf16_torch_delta_is_the_compiled_sum(cli, tied, tmp_path):
    """Its backward's D = (dO * O).sum(-1) as the released code runs it (train.py's compile = True:
    the backward traced under autocast, where sum autocasts to float32): PyTorch's Inductor, given
    the same graph (the BF16 product, then float32), keeps the product exact, so D is the float32
    sum of exact products; the recipe's sequential sum and Inductor's vector reduction may round
    differently in the last places, but rounding each product to BF16 (the eager graph's dtypes) is
    thousands of float32 ulps away."""
    qp, kp, vp, dop = tied
    save_file({"q": qp, "k": kp, "v": vp, "do": dop}, tmp_path / "paper.safetensors")
    cli.run("attention", tmp_path / "paper.safetensors", "--recipe", "fa2-bf16-torch", "--backward", "-o",
            tmp_path / "paper_b.safetensors")
    out = load_file(tmp_path / "paper_b.safetensors")
    compiled = torch.compile(lambda d_o, o: (d_o * o).float().sum(dim=-1))(dop, out["o"])
    magnitude = (dop.double() * out["o"].double()).abs().sum(dim=-1)
    ulps = ((out["delta"].double() - compiled.double()).abs() / (magnitude * 2.0**-24)).max().item()
    eager = (dop * out["o"]).float().sum(dim=-1)
    eager_ulps = ((eager.double() - compiled.double()).abs() / (magnitude * 2.0**-24)).max().item()
    assert compiled.dtype == torch.float32 and ulps <= 64 and eager_ulps > 1000, (ulps, eager_ulps)


def released_bucket(q, k, v, causal, stable):
    """One 512-key bucket of the released forward with autocast's dtypes written out (as
    examples/train_bias.py runs it): what torch.compile is given."""
    bf = torch.bfloat16
    n, d = q.shape[-2], q.shape[-1]
    masked = -torch.finfo(bf).max
    s = torch.einsum("...id,...jd->...ij", q, k) * d**-0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), masked)
    m = s.amax(dim=-1, keepdim=True)
    if stable:
        near = (s >= m - 1e-3).sum(dim=-1, keepdim=True) > 1
        m = torch.where(near & (m > 0), 2.0 * m, m)
        m = torch.where(near & (m < 0), torch.zeros_like(m), m)
    m = torch.maximum(m, torch.full_like(m, masked))
    p = torch.exp((s - m).float())
    row_sum = p.sum(dim=-1, keepdim=True).clamp(min=1e-10).to(bf)
    o = torch.einsum("...ij,...jd->...id", p.to(bf), v) / row_sum
    return o, (row_sum.float().log() + m.float()).squeeze(-1)



def exact_product_head(n, d, seed):
    """q, k whose products are small integers over 4 (exact in any order, so PyTorch's BF16
    matrix product and the recipe's agree), two tied keys, and V one-hot (each output element is
    one P-bar), so that what is compared is the softmax alone."""
    g = torch.Generator().manual_seed(seed)
    q = (torch.randint(-6, 7, (2, n, d), generator=g) / 4).bfloat16()
    k = torch.randint(-3, 4, (2, n, d), generator=g).bfloat16()
    k[:, 7] = k[:, 3]
    return q, k, torch.eye(n, d).bfloat16().expand(2, n, d).contiguous()


# fa2-bf16-torch-compiled is the released forward under torch.compile (train.py's compile = True)
# bit for bit: Inductor keeps S scale, the exp argument and the row sum in float32, with SLEEF's
# exp and log and its 16-lane sum, so the eager forward's bits differ in most places.
@pytest.mark.parametrize("n, d, causal, stable, vector", [
    (100, 128, False, False, "avx512"), (100, 128, False, True, "avx512"), (100, 128, True, False, "avx512"),
    (100, 128, True, True, "avx512"), (64, 64, True, True, "avx512"), (100, 128, True, True, "avx2"),
    (64, 64, False, False, "avx2")])
def test_fa2_bf16_torch_compiled_is_the_compiled_forward(cli, tmp_path, n, d, causal, stable, vector):
    need(vector)
    q, k, v = exact_product_head(n, d, 5)
    save_file({"q": q, "k": k, "v": v}, tmp_path / "in.safetensors", metadata={"causal": str(causal).lower()})
    cli.run("attention", tmp_path / "in.safetensors", "--recipe", "fa2-bf16-torch-compiled", "--set",
            f"max_adjust={'on' if stable else 'off'}", "--set", f"cpu_vector={vector}", "-o",
            tmp_path / "out.safetensors")
    out = load_file(tmp_path / "out.safetensors")
    o, lse = compiled_at(released_bucket, vector)(q, k, v, causal, stable)
    assert torch.equal(out["o"].view(torch.int16), o.view(torch.int16)), int((out["o"] != o).sum())
    assert torch.equal(out["lse"].view(torch.int32), lse.view(torch.int32)), int((out["lse"] != lse).sum())
    eager = released_bucket(q, k, v, causal, stable)[0]
    assert (eager.view(torch.int16) != o.view(torch.int16)).float().mean() > 0.1, "eager and compiled must part"


@pytest.mark.parametrize("d, vector", [(40, "avx512"), (64, "avx512"), (128, "avx512"), (64, "avx2"), (40, "avx2")])
def test_fa2_bf16_torch_compiled_delta_is_inductors_sum(cli, tmp_path, d, vector):
    """Its delta is Inductor's (dO * O).sum(-1) bit for bit (two vectors of float lanes, as a loop
    over BF16 loads has them: 32 with AVX-512, 16 with AVX2); the sequential float32 sum of
    fa2-bf16-torch is not."""
    need(vector)
    g = torch.Generator().manual_seed(6)
    q, k, v, d_o = (torch.randn(2, 96, d, generator=g).bfloat16() for _ in range(4))
    save_file({"q": q, "k": k, "v": v, "do": d_o}, tmp_path / "in.safetensors")
    compiled = compiled_at(lambda a, b: (a.float() * b.float()).sum(dim=-1), vector)
    parted = {}
    for recipe in ("fa2-bf16-torch-compiled", "fa2-bf16-torch"):
        cli.run("attention", tmp_path / "in.safetensors", "--recipe", recipe, "--backward", "-o",
                tmp_path / "out.safetensors", *(["--set", f"cpu_vector={vector}"] if "compiled" in recipe else []))
        out = load_file(tmp_path / "out.safetensors")
        parted[recipe] = int((compiled(d_o, out["o"]).view(torch.int32) != out["delta"].view(torch.int32)).sum())
    assert parted["fa2-bf16-torch-compiled"] == 0 and (d == 40 or parted["fa2-bf16-torch"] > 0), parted


def released_bucket_backward(s, dp, lse, o, d_o, q, k, causal):
    """The released backward (it runs only compiled) of one bucket, given the BF16 einsum
    outputs S = Q K^T and dP = dO V^T, the gradient products in float64 and then rounded as the
    BF16 einsums round (the recipe's grad_product=f64)."""
    bf = torch.bfloat16
    n, d = q.shape[-2], q.shape[-1]
    scale = d**-0.5
    s = s * scale
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s.float() - lse.unsqueeze(-1))
    dv = (p.to(bf).double().transpose(-1, -2) @ d_o.double()).float().to(bf)
    delta = (d_o.float() * o.float()).sum(dim=-1, keepdim=True)
    ds = p * scale * (dp.float() - delta)
    dq = (ds.to(bf).double() @ k.double()).float().to(bf)
    dk = (ds.to(bf).double().transpose(-1, -2) @ q.double()).float().to(bf)
    return {"dq": dq, "dk": dk, "dv": dv, "delta": delta.squeeze(-1)}


@pytest.mark.parametrize("n, d, causal, vector", [(100, 128, False, "avx512"), (100, 128, True, "avx512"),
                                                  (64, 64, True, "avx512"), (100, 128, True, "avx2")])
def test_fa2_bf16_torch_compiled_backward_is_the_compiled_backward(cli, tmp_path, n, d, causal, vector):
    """dQ, dK, dV and delta of the recipe are those of the released backward under torch.compile
    bit for bit (products in float64 on both sides: score, P V and gradient products); those of
    fa2-bf16-torch (the eager forward and the kernels' backward: exp2 of the scaled score, the
    scale applied to dK and dQ at the end) are not."""
    need(vector)
    g = torch.Generator().manual_seed(8)
    q, k, v, d_o = (torch.randn(2, n, d, generator=g).bfloat16() for _ in range(4))
    save_file({"q": q, "k": k, "v": v, "do": d_o}, tmp_path / "in.safetensors",
              metadata={"causal": str(causal).lower()})
    exact = [x for kv in ("score_product=f64", "pv_product=f64", "grad_product=f64") for x in ("--set", kv)]
    outs = {}
    for recipe in ("fa2-bf16-torch-compiled", "fa2-bf16-torch"):
        vectors = ["--set", f"cpu_vector={vector}"] if "compiled" in recipe else []
        cli.run("attention", tmp_path / "in.safetensors", "--recipe", recipe, "--backward", *exact, *vectors, "-o",
                tmp_path / f"{recipe}.safetensors")
        outs[recipe] = load_file(tmp_path / f"{recipe}.safetensors")
    out = outs["fa2-bf16-torch-compiled"]
    s = (q.double() @ k.double().transpose(-1, -2)).float().bfloat16()
    dp = (d_o.double() @ v.double().transpose(-1, -2)).float().bfloat16()
    theirs = compiled_at(released_bucket_backward, vector)(s, dp, out["lse"], out["o"], d_o, q, k, causal)
    for name, x in theirs.items():
        bits = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
        assert torch.equal(out[name].view(bits), x.view(bits)), f"{name}: {int((out[name] != x).sum())} differ"
    kernels = outs["fa2-bf16-torch"]["dq"].view(torch.int16) != theirs["dq"].view(torch.int16)
    assert kernels.float().mean() > 0.05, "the kernels' backward must differ"


def test_fa2_bf16_torch_compiled_refuses_what_it_does_not_model(cli, tmp_path):
    q, k, v = exact_product_head(64, 64, 7)
    save_file({"q": q, "k": k, "v": v}, tmp_path / "in.safetensors")
    x = tmp_path / "x.safetensors"
    m = cli.error("attention", tmp_path / "in.safetensors", "--recipe", "fa2-bf16-torch-compiled", "--set",
                  "block_n=32", "-o", x)
    assert "past one KV bucket" in m and "64 keys" in m and "block_m = block_n = 512" in m, m
    m = cli.error("attention", tmp_path / "in.safetensors", "--recipe", "fa2-bf16-torch", "--set", "delta_sum=lanes32",
                  "--set", "delta_format=bf16", "-o", x)
    assert "delta_sum" in m, m


def test_bias_with_the_layer_input_agrees_with_autograd(cli, tmp_path):
    """`bias` with the layer input x and the query weight (q = x wq, fused [M, H * D]): dW^Q = x^T dQ
    from float64 autograd on q, k, v, dO as the kernel holds them (BF16 under fa2-bf16), the mean
    cosine of the rank-1 matrices x[T]^T (PK)[T] from Gram matrices, and the projection residual of
    the file's q, each per head against the JSON."""
    B, H, N, D, M = 2, 2, 48, 16, 24
    g = torch.Generator().manual_seed(13)
    x = torch.randn(B, N, M, generator=g)
    wq = torch.randn(M, H * D, generator=g) / M**0.5
    qx = (x.double() @ wq.double()).float().view(B, N, H, D).transpose(1, 2).contiguous()
    kx, vx, dox = (torch.randn(B, H, N, D, generator=g) for _ in range(3))
    save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x, "wq": wq}, tmp_path / "layer.safetensors",
              metadata={"causal": "true"})
    heads = cli.json("bias", tmp_path / "layer.safetensors")["query_weight"]["heads"]

    def held(t):
        return t.bfloat16().double()

    q64 = held(qx).requires_grad_()
    o = torch.nn.functional.scaled_dot_product_attention(q64, held(kx), held(vx), is_causal=True)
    o.backward(held(dox))
    dwq = torch.einsum("bta,bhtj->ahj", x.double(), q64.grad)  # [M, H, D]
    mask = torch.ones(N, N, dtype=torch.bool).tril()
    p = torch.softmax((q64.detach() @ held(kx).transpose(-1, -2) / D**0.5).masked_fill(~mask, float("-inf")), dim=-1)
    pk = p @ held(kx)  # [B, H, N, D]
    for h in range(H):
        xs = torch.nn.functional.normalize(x.double().reshape(B * N, M), dim=1)
        ps = torch.nn.functional.normalize(pk[:, h].reshape(B * N, D), dim=1)
        pairs = (xs @ xs.T) * (ps @ ps.T)
        cosine = (pairs.sum() - pairs.diagonal().sum()).item() / (B * N * (B * N - 1))
        residual = ((qx[:, h].double() - x.double() @ wq[:, h * D:(h + 1) * D].double()).norm()
                    / qx[:, h].double().norm()).item()
        assert abs(heads[h]["dwq_norm"] / dwq[:, h].norm().item() - 1) < 1e-9, h
        assert abs(heads[h]["rank1_cosine_similarity"] - cosine) < 1e-9, h
        assert abs(heads[h]["q_projection_residual"] - residual) < 1e-9 and residual < 1e-6, h
    save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x[:, :40].contiguous()}, tmp_path / "short_x.safetensors")
    m = cli.error("bias", tmp_path / "short_x.safetensors")
    assert "short_x.safetensors" in m and "'x'" in m, m
    save_file({"q": qx, "k": kx, "v": vx, "do": dox, "x": x, "wq": torch.full_like(wq, float("nan"))},
              tmp_path / "nan_wq.safetensors")
    m = cli.error("bias", tmp_path / "nan_wq.safetensors")
    assert all(s in m for s in ("nan_wq.safetensors", "'wq'", "NaN")), m


def test_crosscheck_without_a_gpu_exits_3(cli):
    """Bit-for-bit on a GPU (exit 0), one line and exit 3 without one (CI)."""
    p = cli.run("crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--scenario", "sink", "--n", "80", "--json",
                check=False)
    if p.returncode == 0:
        j = json.loads(p.stdout)
        assert j["matched"] == j["total"]
    else:
        assert p.returncode == 3 and p.stderr.startswith("roundscope: error: ") and p.stderr.count("\n") == 1, p.stderr
    m = cli.error("crosscheck", "--recipe", "fa2-bf16", "--synthetic", "--scenario", "nope")
    assert "--scenario" in m and "nope" in m, m
