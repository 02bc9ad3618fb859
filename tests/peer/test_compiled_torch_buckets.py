"""fa2-bf16-torch-compiled past one KV bucket: the released attention.py forward and backward
over every 512-key bucket, under torch.compile as train.py runs it, bit for bit. Inductor carries
the row max, the row sum and O across buckets in float32 but reloads the BF16 row sums it stores
for O's division in some row blocks (compiled_torch_softmax.hpp's division_form): the recipe
follows it, and a float32 row-sum buffer in the compiled code is what row_sum_format=f32 models.
The backward adds each bucket's BF16 einsum to dQ, dK and dV carried in float32."""
import pytest
import torch
from cpu_vectors import compiled_at, need
from safetensors.torch import load_file, save_file

BF = torch.bfloat16
BUCKET = 512


def released_forward(q, k, v, causal, stable, sums_dtype=BF):
    """attention.py's FlashAttentionFunction.forward (every bucket, in place on its buffers, as
    released) with CUDA BF16 autocast's dtypes written out: the einsums in BF16, exp and the
    sums on autocast's float32 list. `sums_dtype`: the row sums' buffer (q's dtype, BF16, in the
    released code)."""
    masked = -torch.finfo(BF).max
    o = torch.zeros_like(q)
    sums = torch.zeros((*q.shape[:-1], 1), dtype=sums_dtype)
    maxes = torch.full((*q.shape[:-1], 1), masked, dtype=BF)
    scale = q.shape[-1] ** -0.5
    rows = zip(q.split(BUCKET, -2), o.split(BUCKET, -2), sums.split(BUCKET, -2), maxes.split(BUCKET, -2))
    for ind, (qc, oc, row_sums, row_maxes) in enumerate(rows):
        q_start = ind * BUCKET
        for k_ind, (kc, vc) in enumerate(zip(k.split(BUCKET, -2), v.split(BUCKET, -2))):
            k_start = k_ind * BUCKET
            s = torch.einsum("...id,...jd->...ij", qc, kc) * scale
            if causal and q_start < k_start + BUCKET - 1:
                hidden = torch.ones((qc.shape[-2], kc.shape[-2]), dtype=torch.bool).triu(q_start - k_start + 1)
                s.masked_fill_(hidden, masked)
            block_max = s.amax(dim=-1, keepdim=True)
            if stable:
                several = (s >= block_max - 1e-3).sum(dim=-1, keepdim=True) > 1
                block_max = torch.where(several & (block_max > 0), 2.0 * block_max, block_max)
                block_max = torch.where(several & (block_max < 0), 0, block_max)
            new_max = torch.maximum(block_max, row_maxes)
            p = torch.exp((s - new_max).float())
            block_sum = p.sum(dim=-1, keepdim=True).clamp(min=1e-10)
            pv = torch.einsum("...ij,...jd->...id", p.to(BF), vc)
            carry = torch.exp((row_maxes - new_max).float())
            new_sums = carry * row_sums + block_sum
            oc.mul_(carry).add_(pv)
            row_maxes.copy_(new_max)
            row_sums.copy_(new_sums)
        oc.div_(row_sums)
    return o, (sums.float().log() + maxes).squeeze(-1)


def released_backward(q, k, v, o, lse, do, causal):
    """attention.py's FlashAttentionFunction.backward (every bucket, in place on dQ, dK, dV as
    released) with CUDA BF16 autocast's dtypes: the einsums in BF16, exp and D's sum in float32."""
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    scale = q.shape[-1] ** -0.5
    rows = zip(q.split(BUCKET, -2), o.split(BUCKET, -2), do.split(BUCKET, -2), lse.split(BUCKET, -2),
               dq.split(BUCKET, -2))
    for ind, (qc, oc, doc, lsec, dqc) in enumerate(rows):
        q_start = ind * BUCKET
        cols = zip(k.split(BUCKET, -2), v.split(BUCKET, -2), dk.split(BUCKET, -2), dv.split(BUCKET, -2))
        for k_ind, (kc, vc, dkc, dvc) in enumerate(cols):
            k_start = k_ind * BUCKET
            s = torch.einsum("...id,...jd->...ij", qc, kc) * scale
            if causal and q_start < k_start + BUCKET - 1:
                hidden = torch.ones((qc.shape[-2], kc.shape[-2]), dtype=torch.bool).triu(q_start - k_start + 1)
                s.masked_fill_(hidden, float("-inf"))
            p = torch.exp(s - lsec)
            dv_chunk = torch.einsum("...ij,...id->...jd", p.to(BF), doc)
            dp = torch.einsum("...id,...jd->...ij", doc, vc)
            delta = (doc * oc).float().sum(dim=-1, keepdim=True)
            ds = p * scale * (dp - delta)
            dqc.add_(torch.einsum("...ij,...jd->...id", ds.to(BF), kc))
            dkc.add_(torch.einsum("...ij,...id->...jd", ds.to(BF), qc))
            dvc.add_(dv_chunk)
    return dq, dk, dv


def one_per_bucket(n, d, g, top, div):
    """Row i holds one value (an integer below `top` in magnitude, over div) in column i mod 512
    where that is below d: every einsum of the backward has one term per bucket, so PyTorch's
    BF16 matrix products and the recipe's agree, and what is compared is the rest."""
    x = torch.zeros(1, n, d)
    i = torch.arange(n)
    keep = i % BUCKET < d
    x[0, i[keep], i[keep] % BUCKET] = torch.randint(-top, top + 1, (int(keep.sum()),), generator=g) / div
    return x.to(BF)


def exact_products(heads, n, d, seed):
    """Q K^T in small integers over 4 (exact in any order, so PyTorch's BF16 matrix products and
    the recipe's agree), two tied keys, and V one-hot with one key per bucket for each column, so
    that each bucket's P-bar V is one P-bar and what is compared is the softmax and the carry."""
    g = torch.Generator().manual_seed(seed)
    q = (torch.randint(-6, 7, (heads, n, d), generator=g) / 4).to(BF)
    k = torch.randint(-3, 4, (heads, n, d), generator=g).to(BF)
    k[:, 7] = k[:, 3]
    v = (torch.arange(n)[:, None] % BUCKET == torch.arange(d)[None, :]).to(BF).expand(heads, n, d).contiguous()
    return q, k, v


def compiled(q, k, v, causal, stable, sums_dtype=BF, vector="avx512"):
    need(vector)
    return compiled_at(released_forward, vector)(q, k, v, causal, stable, sums_dtype)


def recipe_forward(cli, tmp_path, q, k, v, causal, *settings):
    save_file({"q": q, "k": k, "v": v}, tmp_path / "in.safetensors", metadata={"causal": str(causal).lower()})
    cli.run("attention", tmp_path / "in.safetensors", "--recipe", "fa2-bf16-torch-compiled",
            *[x for s in settings for x in ("--set", s)], "-o", tmp_path / "out.safetensors")
    return load_file(tmp_path / "out.safetensors")


def differing(a, b):
    view = {BF: torch.int16, torch.float32: torch.int32}[a.dtype]
    return int((a.view(view) != b.view(view)).sum())


# Two to five buckets: each division form (never, last, before-last) in some row block; with
# AVX2's vectors (8 float lanes) too, and a last bucket part full (1000 keys: 512 + 488).
@pytest.mark.parametrize("heads, n, d, causal, stable, vector", [
    (2, 1024, 64, False, False, "avx512"), (1, 1024, 128, True, True, "avx512"), (1, 1536, 64, False, True, "avx512"),
    (1, 2048, 64, True, False, "avx512"), (1, 2560, 32, True, True, "avx512"), (1, 1000, 64, True, False, "avx512"),
    (1, 1024, 64, True, True, "avx2"), (1, 1536, 32, False, False, "avx2")])
def test_the_recipe_is_the_compiled_forward_over_every_bucket(cli, tmp_path, heads, n, d, causal, stable, vector):
    q, k, v = exact_products(heads, n, d, n + d)
    o, lse = compiled(q, k, v, causal, stable, vector=vector)
    ours = recipe_forward(cli, tmp_path, q, k, v, causal, f"max_adjust={'on' if stable else 'off'}",
                          f"cpu_vector={vector}")
    assert differing(ours["o"], o) == 0 and differing(ours["lse"], lse) == 0, (differing(ours["o"], o),
                                                                               differing(ours["lse"], lse))


def test_the_vectors_show(cli, tmp_path):
    """Negative control: AVX2's 8 lanes sum P-bar in another order than AVX-512's 16, and the
    recipe of the other width misses some of the compiled code's bits."""
    q, k, v = exact_products(1, 1024, 64, 5)
    o, lse = compiled(q, k, v, False, False, vector="avx2")
    wrong = recipe_forward(cli, tmp_path, q, k, v, False, "cpu_vector=avx512")
    assert differing(wrong["lse"], lse) > 0 and differing(wrong["o"], o) > 0


# The gradients over two to five buckets of queries and keys, each bucket's einsum added to a
# float32 sum; at 2048 keys adding them in BF16 instead would change 4,574 dQ and 36,423 dK values.
@pytest.mark.parametrize("n, d, causal, vector", [(1024, 64, False, "avx512"), (2048, 64, False, "avx512"),
                                                  (1536, 64, True, "avx512"), (2560, 32, True, "avx512"),
                                                  (1536, 32, False, "avx2")])
def test_the_recipe_is_the_compiled_backward_over_every_bucket(cli, tmp_path, n, d, causal, vector):
    g = torch.Generator().manual_seed(n + d)
    q, k, do = one_per_bucket(n, d, g, 12, 4), one_per_bucket(n, d, g, 6, 2), one_per_bucket(n, d, g, 8, 4)
    v = torch.randn(1, n, d, generator=g).to(BF)
    save_file({"q": q, "k": k, "v": v, "do": do}, tmp_path / "in.safetensors", metadata={"causal": str(causal).lower()})
    cli.run("attention", tmp_path / "in.safetensors", "--recipe", "fa2-bf16-torch-compiled", "--backward", "--set",
            f"cpu_vector={vector}", "-o", tmp_path / "out.safetensors")
    ours = load_file(tmp_path / "out.safetensors")
    need(vector)
    theirs = compiled_at(released_backward, vector)(q, k, v, ours["o"], ours["lse"].unsqueeze(-1), do, causal)
    for name, x in zip(("dq", "dk", "dv"), theirs):
        assert differing(ours[name], x) == 0, f"{name}: {differing(ours[name], x)} of {x.numel()} differ"
    eager = released_backward(q, k, v, ours["o"], ours["lse"].unsqueeze(-1), do, causal)
    assert differing(eager[1], theirs[1]) > 100, "eager (BF16 sums, PyTorch's exp) and compiled must part"


def test_the_bf16_row_sum_buffer_is_what_rounds(cli, tmp_path):
    """Compiled with the row sums' buffer in float32, the forward is the recipe with
    row_sum_format=f32; the released BF16 buffer changes O (the l term is back past one bucket)."""
    q, k, v = exact_products(2, 1024, 64, 3)
    o32, lse32 = compiled(q, k, v, False, False, torch.float32)
    ours = recipe_forward(cli, tmp_path, q, k, v, False, "row_sum_format=f32")
    assert differing(ours["o"], o32) == 0 and differing(ours["lse"], lse32) == 0
    o16, lse16 = compiled(q, k, v, False, False)
    assert differing(o16, o32) > 1000 and differing(lse16, lse32) == 0, differing(o16, o32)


def test_each_division_form_shows(cli, tmp_path):
    """Negative controls: at 1536 keys row blocks 0 and 2 divide by the stored row sum and block 1
    by the update from the stored one; dividing every row block by the float32 sum (the one-bucket
    form) differs in each row block."""
    q, k, v = exact_products(1, 1536, 64, 11)
    o, _ = compiled(q, k, v, False, False)
    f32 = recipe_forward(cli, tmp_path, q, k, v, False, "row_sum_format=f32")["o"]
    for block in range(3):
        rows = slice(block * BUCKET, (block + 1) * BUCKET)
        assert differing(f32[:, rows], o[:, rows]) > 100, block


def test_what_it_does_not_model_is_refused(cli, tmp_path):
    x = tmp_path / "x.safetensors"
    q, k, v = exact_products(1, 3072, 16, 1)
    save_file({"q": q, "k": k, "v": v}, tmp_path / "six.safetensors")
    m = cli.error("attention", tmp_path / "six.safetensors", "--recipe", "fa2-bf16-torch-compiled", "-o", x)
    assert "up to 5 buckets" in m and "6 were not" in m, m
    q, k, v = exact_products(1, 1024, 16, 1)
    save_file({"q": q, "k": k, "v": v}, tmp_path / "two.safetensors")
    m = cli.error("attention", tmp_path / "two.safetensors", "--recipe", "fa2-bf16-torch-compiled", "--set",
                  "block_n=256", "-o", x)
    assert "block_m = block_n = 512" in m, m
    save_file({"q": q[:, :600].clone(), "k": k, "v": v}, tmp_path / "cross.safetensors")
    m = cli.error("attention", tmp_path / "cross.safetensors", "--recipe", "fa2-bf16-torch-compiled", "-o", x)
    assert "as many queries as keys" in m, m
    for recipe, why in (("fa2-bf16", "softmax=compiled-torch takes avx2"), ("torch-cpu-bf16", "AVX-512 build")):
        m = cli.error("attention", tmp_path / "two.safetensors", "--recipe", recipe, "--set", "cpu_vector=avx2",
                      "-o", x)
        assert "cpu_vector" in m and why in m, m
