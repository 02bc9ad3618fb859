"""The torch-cpu-bf16 recipe against PyTorch's own CPU attention: F.scaled_dot_product_attention on
BF16 tensors (ATen's cpu_flash_attention on an AVX-512 CPU) gives O and the LSE that `roundscope
attention` computes, bit for bit (and on AVX512-BF16 the gradients autograd gets from its
backward), over shapes that reach every rule the recipe holds: one and
several KV blocks (and a tail past the last whole vector of 16 keys), fewer and more than 64 query
rows (the AMX GEMM's two chunk rules, head dimensions that 32 does not divide), ATen's causal mask,
a boolean padding mask, an additive mask, grouped-query heads, and the shapes whose GEMM ATen's
BLAS runs as a GEMV (a query block of one row, decoding one token; a KV block of one key).

The BF16 GEMM is the CPU's: with AMX-BF16 the recipe as it is (score_product=amx, pv_product=amx,
told torch's thread count); on an Intel CPU with AVX512-BF16 and no AMX, the same recipe with
score_product=avx512-bf16 and pv_product=avx512-bf16 (VDPBF16PS, emu/mma/amx_gemm.hpp); on an AMD
CPU with AVX-512, score_product=mkl-avx2 and pv_product=mkl-avx2 (MKL's AVX2 GEMM,
emu/mma/mkl_avx2_gemm.hpp), which models GEMMs of at least 24 x 4 and refuses the shapes that
need others. Elsewhere the tests skip, saying why (roundscope.torch.cpu_settings)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import roundscope as rs
import roundscope.torch as rst

RECIPE = "torch-cpu-bf16"


def _cpu():
    """This CPU's settings of the recipe (roundscope.torch.cpu_settings), or why it has none."""
    try:
        return rst.cpu_settings(), ""
    except ValueError as e:
        return None, str(e)


SETTINGS, WHY = _cpu()
# "amx", "avx512-bf16", "mkl-avx2" or None: the BF16 GEMM this CPU runs, where the recipe models it
GEMM = None if SETTINGS is None else "amx" if "aten_threads" in SETTINGS else SETTINGS["score_product"]
# The recipe models the AVX-512 build of the kernel with the AMX or AVX512-BF16 GEMM: elsewhere
# torch runs other code (AVX2's exp, another GEMM), which the recipe does not claim to reproduce.
pytestmark = pytest.mark.skipif(GEMM is None, reason=WHY)


def _settings(threads=None):
    """The recipe's settings on this CPU: AMX's packing follows torch's thread count; AVX512-BF16
    never packs."""
    if GEMM == "amx":
        return {"aten_threads": threads or torch.get_num_threads()}
    return dict(SETTINGS)

# (batch, heads, kv heads, Nq, Nk, D, mask); torch's own thread count, which the recipe is told
# (aten_threads): whether ATen packs its GEMM operands depends on it
CASES = [
    (1, 1, 1, 32, 64, 64, None),  # one KV block, < 64 queries: chunks of 32
    (1, 2, 2, 40, 17, 48, None),  # query blocks 32 + 8, a key past the vector, D = 32 + 16
    (1, 2, 2, 100, 300, 48, None),  # >= 64 queries: D in 2 x 24, P V's 300 keys in chunks of 30
    (1, 1, 1, 64, 1000, 64, None),  # two KV blocks (512 + 488: chunks of 8), the rescale
    (2, 2, 2, 200, 200, 80, "causal"),  # ATen's causal mask (top-left), D in 4 x 20
    (2, 2, 2, 130, 600, 128, "padding"),  # a boolean key-padding mask per batch, two KV blocks
    (1, 1, 1, 96, 100, 48, "additive"),  # an additive mask: fma(S, scale, mask)
    (1, 4, 2, 70, 96, 64, "causal"),  # grouped-query heads, Nq != Nk (top-left)
    (1, 1, 1, 800, 520, 64, None),  # ATen's 256-row query blocks, an 8-key last KV block
    (1, 2, 2, 200, 40, 48, None),  # fewer than 64 keys: ATen's unpacked GEMM, chunks of 32
    (1, 1, 1, 65, 513, 48, "causal"),  # packed (AMX): a one-row query block and a one-key KV block
    (1, 2, 2, 64, 768, 64, None),  # 512 + 256 keys: AVX512-BF16's P V in two halves of 256, then one
    (1, 2, 2, 100, 1024, 128, "causal"),  # two whole KV blocks under ATen's causal mask
    (1, 1, 1, 40, 390, 320, None),  # AVX512-BF16: S over D = 320 in one block, P V in two of 195
    # the GEMV (emu/mma/onednn_gemv.hpp): decoding one token, several heads (ATen's parallel region)
    # and one head (outside it, where the BLAS may thread), two KV blocks, GQA and a padding mask;
    # a last query block of one row; a last KV block of one key
    (1, 8, 8, 1, 300, 128, None),
    (1, 1, 1, 1, 1000, 64, None),
    (2, 4, 2, 1, 200, 64, "padding"),
    (1, 2, 2, 33, 64, 64, None),
    (1, 2, 2, 40, 513, 48, None),
    # MKL's AVX2 GEMM: S over D = 256 in two blocks of 128; a last KV block of 8 keys that ATen's
    # causal rows never reach; a padding mask with whole query blocks
    (1, 1, 1, 64, 300, 256, None),
    (1, 1, 1, 100, 520, 64, "causal"),
    (2, 2, 2, 128, 600, 128, "padding"),
]
# What the AMX recipe refuses (amx_gemm.hpp): the unpacked GEMV shapes, the same kernel untested there
GEMV_CASES = {c for c in CASES if c[3] == 1 or c[3] in (33, 40)}


def _mkl_small(case, dtype=torch.bfloat16):
    """Whether ATen asks MKL for a GEMM its AVX2 kernel does not run (so mkl-avx2 refuses): BF16 and
    FP16 below 24 x 4, float32 below 12 rows or with other than 4, 8 or at least 12 columns
    (column-major: S is keys x queries, P V is D x queries). The short GEMMs are the last query
    block's (blocks of 32, 64 or 256 rows as Nq grows) and the last KV block's (blocks of 512,
    whole under ATen's causal mask, where a causal row reaches it)."""
    _, _, _, nq, nk, d, kind = case
    q_block = min(nq, 256 if nq >= 768 else 64 if nq >= 192 else 32)
    rows = min(q_block, nq % q_block or q_block)
    last = nk % 512 or min(nk, 512)
    reached = kind != "causal" or min(nq, nk) > nk - last
    keys = last if reached else 512
    if dtype == torch.float32:
        def runs(m, n):
            return m >= 12 and (n in (4, 8) or n >= 12)
    else:
        def runs(m, n):
            return m >= 24 and n >= 4
    return not runs(keys, rows) or not runs(d, rows)


def _mask(kind, b, h, nq, nk, g):
    if kind == "padding":
        keep = torch.ones(b, 1, 1, nk, dtype=torch.bool)
        keep[0, ..., nk - 37:] = False
        keep[-1, ..., : nk // 3] = False
        return keep
    if kind == "additive":
        return torch.randn(1, 1, nq, nk, generator=g) * 3
    return None


def _case_id(case):
    b, h, hkv, nq, nk, d, mask = case
    return f"B{b}H{h}/{hkv}-{nq}x{nk}-D{d}-{mask or 'nomask'}"


def _bits(t):
    return _bits_t(t).numpy()


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_recipe_is_pytorch_cpu_attention_bit_for_bit(case):
    _check_forward(case, torch.bfloat16, _settings())


def _check_forward(case, dtype, settings):
    """O and the LSE of torch's CPU kernel on `dtype` tensors against the recipe under `settings`,
    every bit; a shape the recipe refuses on this CPU is refused with the reason."""
    b, h, hkv, nq, nk, d, kind = case
    if GEMM == "amx" and case in GEMV_CASES:
        with pytest.raises(ValueError, match="untested on AMX"):
            rs.attention(np.zeros((h, nq, d), np.float32), np.zeros((hkv, nk, d), np.float32),
                         np.zeros((hkv, nk, d), np.float32), recipe=RECIPE, settings=settings,
                         causal=kind == "causal")
        return
    if GEMM == "mkl-avx2" and _mkl_small(case, dtype):
        with pytest.raises(ValueError, match="kernels other than the AVX2 one"):
            rs.attention(np.zeros((h, nq, d), np.float32), np.zeros((hkv, nk, d), np.float32),
                         np.zeros((hkv, nk, d), np.float32), recipe=RECIPE, settings=settings,
                         causal=kind == "causal")
        return
    g = torch.Generator().manual_seed(nq * 7 + nk + d)
    q = torch.randn(b, h, nq, d, generator=g).to(dtype)
    k, v = (torch.randn(b, hkv, nk, d, generator=g).to(dtype) for _ in range(2))
    mask = _mask(kind, b, h, nq, nk, g)
    causal = kind == "causal"
    # the kernel F.scaled_dot_product_attention picks on the CPU, called by name for its LSE
    kx, vx = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
    additive = mask  # the kernel takes a boolean mask as F.scaled_dot_product_attention hands it on: -inf and 0
    if mask is not None and mask.dtype == torch.bool:
        additive = torch.zeros(mask.shape).masked_fill(~mask, -torch.inf)
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, kx, vx, 0.0, causal, attn_mask=additive)[:2]
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=hkv != h)
    assert torch.equal(_bits_t(sdpa), _bits_t(o)), "F.scaled_dot_product_attention ran another kernel"
    e = rs.attention(q, k, v, recipe=RECIPE, settings=settings, causal=causal,
                     causal_alignment="top-left", attn_mask=mask)
    assert e["o"].dtype == dtype
    o_diff = int((_bits(e["o"]) != _bits(o)).sum())
    lse_diff = int((_bits(e["lse"].float()) != _bits(lse)).sum())
    assert o_diff == 0 and lse_diff == 0, f"{o_diff} of {o.numel()} O values and {lse_diff} of {lse.numel()} LSE differ"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_fp16_and_fp32_are_pytorch_cpu_attention_bit_for_bit_on_amd(case, dtype):
    """FP16 and float32 tensors: on an AMD CPU MKL's FP16 GEMM and SGEMM run AVX2 kernels of the
    blocks its BF16 one does (SGEMM from 12 x 4, 8 or 12 on), and the recipe with the dtype
    throughout (cpu_settings(dtype)) is torch's kernel: float32 with exp_u20, one vector
    accumulator and P kept in float32. Elsewhere the settings are refused with the reason
    (Intel's FP16 and float32 GEMMs are not modelled)."""
    settings = _settings_or_refusal(dtype)
    if settings is not None:
        _check_forward(case, dtype, settings)


@pytest.mark.skipif(GEMM != "mkl-avx2", reason="FP16 and float32 are modelled on an AMD CPU (mkl-avx2)")
@pytest.mark.parametrize("threads", [1, 8])
def test_fp16_and_fp32_bits_do_not_depend_on_torchs_thread_count(threads):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        for dtype in (torch.float16, torch.float32):
            for case in [(2, 4, 2, 100, 600, 64, "causal"), (2, 2, 2, 128, 833, 128, "padding")]:
                _check_forward(case, dtype, rst.cpu_settings(dtype))
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_keys_past_the_last_vector_take_exp_in_double(dtype):
    """The keys past a block's last whole vector of 16 take C's exp(double) rounded to float
    (glibc's expf differs from it in about 1 argument in 400), the rescale glibc's expf. Rows of
    one key at 0 and 15 keys past two vectors at scaled random arguments: O (with V the identity)
    holds each P, and float32's O shows it unrounded."""
    settings = _settings() if dtype == torch.bfloat16 else _settings_or_refusal(dtype)
    if settings is None:
        return
    rng = np.random.default_rng(5)
    nk, d = 47, 48
    for _ in range(20):
        x = torch.from_numpy(rng.uniform(-40, 0, (32, 15)).astype(np.float32))
        q = torch.zeros(1, 1, 32, d)
        q[0, 0, torch.arange(32), torch.arange(32)] = 1.0
        k = torch.zeros(1, 1, nk, d)
        k[0, 0, 1:32, :32] = -1000.0
        k[0, 0, 32:, :32] = x.T
        v = torch.zeros(1, 1, nk, d)
        v[0, 0, torch.arange(nk), torch.arange(nk)] = 1.0
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, scale=0.0731)[:2]
        e = rs.attention(q, k, v, recipe=RECIPE, settings=settings, softmax_scale=0.0731)
        assert (_bits(e["o"]) == _bits(o)).all() and (_bits(e["lse"].float()) == _bits(lse)).all()


def _settings_or_refusal(dtype):
    """This CPU's settings for dtype, or None after checking that they are refused with the reason."""
    if GEMM != "mkl-avx2":
        with pytest.raises(ValueError, match="not modelled"):
            rst.cpu_settings(dtype)
        return None
    return rst.cpu_settings(dtype)


def _bits_t(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32)


def _differing(q, k, v, settings):
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[:2]
    e = rs.attention(q, k, v, recipe=RECIPE, settings={**_settings(), **settings})
    return int((_bits(e["o"]) != _bits(o)).sum()) + int((_bits(e["lse"].float()) != _bits(lse)).sum())


def test_the_recipe_differs_from_its_neighbours():
    """The recipe's own rules carry bits: with either product exact, or other KV blocks, the same
    inputs give other O or LSE values than PyTorch's. For P V, q = 0 makes every P 1 and V's
    columns cancel (large values and their negatives among small ones), so that its rounding
    order shows in BF16."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 100, 48, generator=g).bfloat16() for _ in range(3))
    assert _differing(q, k, v, {"score_product": "f64"}) > 0
    assert _differing(q, k, v, {"block_n": "64"}) > 0
    big = torch.randint(2, 255, (1, 2, 40, 48), generator=g) * 2.0**16
    v = torch.cat([big, -big, torch.randint(-8, 9, (1, 2, 20, 48), generator=g).float()], dim=2)
    v = v[:, :, torch.randperm(100, generator=g)].bfloat16()
    assert _differing(torch.zeros_like(q), k, v, {"pv_product": "f64"}) > 0


@pytest.mark.skipif(GEMM != "amx", reason="ATen packs its GEMM operands on AMX only")
def test_the_thread_count_chooses_the_path():
    """16 heads of 64 queries and keys: ATen packs its GEMM operands with 2 threads, not with 32
    (each thread's work is then below four times the packing's), and the bits differ; the
    recipe follows aten_threads, and without it refuses the shape rather than guess."""
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(1, 16, 64, 48, generator=g).bfloat16() for _ in range(3))
    before = torch.get_num_threads()
    got = {}
    try:
        for threads in (2, 32):
            torch.set_num_threads(threads)
            got[threads] = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[1]
    finally:
        torch.set_num_threads(before)
    assert not torch.equal(got[2], got[32]), "the thread count no longer changes PyTorch's bits"
    for threads, lse in got.items():
        e = rs.attention(q, k, v, recipe=RECIPE, settings={"aten_threads": threads})
        assert (_bits(e["lse"].float()) == _bits(lse)).all(), threads
    with pytest.raises(ValueError, match="aten_threads"):
        rs.attention(q, k, v, recipe=RECIPE)


@pytest.mark.parametrize("nq, nk, why", [(33, 64, "one-row block of queries"), (40, 513, "KV block of one key"),
                                         (1, 64, "one-row block of queries")])
def test_the_amx_recipe_refuses_the_gemv_shapes(nq, nk, why):
    """The AMX recipe refuses the shapes whose GEMM runs as a GEMV on its unpacked path: modelled on
    AVX512-BF16 (avx512-bf16), the same kernel is untested on an AMX CPU."""
    q = np.zeros((1, nq, 64), np.float32)
    k = v = np.zeros((1, nk, 64), np.float32)
    with pytest.raises(ValueError, match=why + ".*untested on AMX"):
        rs.attention(q, k, v, recipe=RECIPE)


def _chain(x, a):
    """sum x a as one float32 chain of VDPBF16PS pairs (the GEMM's order for a short K)."""
    acc = np.float32(0)
    for t in range(0, len(x), 2):
        for u in (t + 1, t):
            if u < len(x):
                acc = np.float32(np.float64(x[u]) * np.float64(a[u]) + np.float64(acc))
    return acc


@pytest.mark.skipif(GEMM != "avx512-bf16", reason="the GEMV is modelled on AVX512-BF16 (refused on AMX)")
@pytest.mark.parametrize("d", [64, 100, 256])
def test_the_gemv_dot_reads_out_through_the_lse(d):
    """One key (a KV block of one key) and scale 1: torch's LSE is S itself, each row's dot product
    by the GEMV. Rows of large values and their negatives among small ones make the order show:
    one float32 chain (the GEMM's) misses some rows, the recipe none."""
    g = torch.Generator().manual_seed(d)
    small = torch.randint(-8, 9, (1, 1, 40, d), generator=g).float()
    sign = torch.randn(1, 1, 40, d, generator=g).sign()
    big = torch.randint(2, 255, (1, 1, 40, d), generator=g).float() * 2.0**12 * sign
    q = torch.where(torch.rand(1, 1, 40, d, generator=g) < 0.3, big, small).bfloat16()
    k = torch.randint(-8, 9, (1, 1, 1, d), generator=g).float().bfloat16()
    v = torch.randn(1, 1, 1, d, generator=g).bfloat16()
    lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, scale=1.0)[1]
    e = rs.attention(q, k, v, recipe=RECIPE, settings=_settings(), softmax_scale=1.0)
    assert (_bits(e["lse"].float()) == _bits(lse)).all()
    qn, kn = q.float().numpy().reshape(40, d), k.float().numpy().reshape(d)
    assert sum(_chain(qn[r], kn) != lse.reshape(-1)[r].item() for r in range(40)) > 0, "the data no longer tells"


@pytest.mark.skipif(GEMM != "avx512-bf16", reason="the GEMV is modelled on AVX512-BF16 (refused on AMX)")
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_gemv_sums_p_v_in_groups_of_eight_at_any_thread_count(threads):
    """Decoding one token of one head, which ATen runs outside its parallel region so that the
    BLAS may split the GEMV among threads: with q = 0 every P is 1 and V's columns of large values
    and their negatives among small ones make the order show in O. Torch sums in groups of 8 on
    one thread at 1, 2 and 4 threads, as the recipe does, and one chain over the keys differs."""
    g = torch.Generator().manual_seed(threads)
    before = torch.get_num_threads()
    chained = 0
    try:
        torch.set_num_threads(threads)
        for n in (64, 256, 512):
            big = torch.randint(2, 255, (n // 5, 32), generator=g).float() * 2.0**22
            small = torch.randint(-8, 9, (n - 2 * (n // 5), 32), generator=g).float()
            v = torch.cat([big, -big, small])[torch.randperm(n, generator=g)].bfloat16().reshape(1, 1, n, 32)
            q = torch.zeros(1, 1, 1, 32).bfloat16()
            k = torch.randn(1, 1, n, 32, generator=g).bfloat16()
            o = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[0]
            e = rs.attention(q, k, v, recipe=RECIPE, settings=_settings())
            assert (_bits(e["o"]) == _bits(o)).all(), n
            vn = v.float().numpy().reshape(n, 32)
            one_chain = np.array([_chain(np.ones(n, np.float32), vn[:, c]) for c in range(32)], np.float32) / n
            chained += int((_bits(torch.from_numpy(one_chain).bfloat16()) != _bits(o.reshape(32))).sum())
    finally:
        torch.set_num_threads(before)
    assert chained > 0, "the data no longer tells one chain from groups of 8"


@pytest.mark.skipif(GEMM != "mkl-avx2", reason="the rule it shows is MKL's AVX2 GEMM's (an AMD CPU)")
@pytest.mark.parametrize("nk", [193, 255, 321, 383, 512 + 193, 512 + 383])
def test_mkl_sums_an_odd_kv_blocks_last_key_alone(nk):
    """A last KV block of an odd 193 to 383 keys: MKL's P V sums two halves of (keys - 1) / 2 and
    then the last key on its own. With q = 0 every P is 1, and a column of V holding -2^24 at the
    block's first key, 2^24 at its middle and 1 at its last gives O = 1 / keys there, where a
    second half that runs on to the last key rounds 2^24 + 1 back to 2^24 and gives 0."""
    last = nk % 512
    v = torch.zeros(1, 1, nk, 32)
    v[..., nk - last, :], v[..., nk - last + last // 2, :], v[..., nk - 1, :] = -(2.0**24), 2.0**24, 1.0
    q, v = torch.zeros(1, 1, 32, 32).bfloat16(), v.bfloat16()
    k = torch.randn(1, 1, nk, 32, generator=torch.Generator().manual_seed(nk)).bfloat16()
    o = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[0]
    assert (o == torch.tensor(1.0 / nk).bfloat16()).all(), "torch no longer sums the last key alone"
    e = rs.attention(q, k, v, recipe=RECIPE, settings=_settings())
    assert (_bits(e["o"]) == _bits(o)).all()


# (batch, heads, kv heads, Nq, Nk, D, mask): one and several query blocks of 32, 64 and 256 rows
# (dK and dV accumulated in BF16 across them), one and several KV blocks (dQ across them, over 512
# keys in one brgemm chain), D = 48 to 128, ATen's causal mask, a boolean padding mask, an
# additive mask, grouped-query heads (a group's heads add to one dK and dV in turn)
BACKWARD_CASES = [
    (1, 1, 1, 32, 100, 64, None),
    (1, 2, 2, 100, 100, 64, None),
    (1, 1, 1, 300, 700, 48, None),  # a P value whose expf sits on a BF16 tie: SLEEF's, not MKL's VML
    (1, 1, 1, 256, 1100, 80, None),
    (2, 2, 2, 200, 300, 80, "causal"),
    (2, 2, 2, 130, 600, 128, "padding"),
    (1, 1, 1, 96, 100, 48, "additive"),
    (1, 1, 1, 768, 200, 64, None),
    (2, 6, 2, 100, 300, 64, "causal"),
    (1, 2, 2, 128, 600, 128, "padding"),  # whole query blocks (an AMD CPU's MKL refuses the 130 above)
]


def _backward_id(c):
    return _case_id(c)


@pytest.mark.parametrize("case", BACKWARD_CASES, ids=_backward_id)
def test_the_backward_is_pytorch_cpu_backward_bit_for_bit(case):
    """On Intel's AVX512-BF16 and on an AMD CPU (MKL's AVX2 GEMM), dQ, dK and dV of autograd through
    F.scaled_dot_product_attention (ATen's cpu_flash_attention_backward) equal the recipe's, bit for
    bit; on AMX the recipe refuses the backward, untested there, and on an AMD CPU the shapes whose
    GEMMs MKL runs with its small kernels."""
    if GEMM == "amx":
        _check_backward_refused(case, _settings(), "untested on AMX")
    else:
        _check_backward(case, torch.bfloat16, _settings())


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("case", BACKWARD_CASES, ids=_backward_id)
def test_the_fp16_and_fp32_backward_is_pytorch_cpu_backward_on_amd(case, dtype):
    """FP16 and float32 gradients on an AMD CPU: S and dP by MKL's FP16 GEMM or SGEMM as in the
    forward; float32 adds its gradients by SGEMM (beta = 1, alpha on Q or K), FP16 by ATen's own
    GEMM (dV and dK one fused chain per element, alpha on P or dS first; dQ in four partial sums).
    Elsewhere cpu_settings refuses the dtype, saying why."""
    settings = _settings_or_refusal(dtype)
    if settings is not None:
        _check_backward(case, dtype, settings)


def _check_backward_refused(case, settings, why):
    b, h, hkv, nq, nk, d, kind = case
    z = np.zeros((h, nq, d), np.float32)
    with pytest.raises(ValueError, match=why):
        rs.attention(z, np.zeros((hkv, nk, d), np.float32), np.zeros((hkv, nk, d), np.float32), recipe=RECIPE,
                     settings=settings, causal=kind == "causal", backward=True, do=z)


def _check_backward(case, dtype, settings):
    """O, dQ, dK and dV of autograd through torch's CPU kernel on `dtype` tensors against the recipe,
    every bit; a shape MKL's small kernels would take is refused with the reason."""
    b, h, hkv, nq, nk, d, kind = case
    if GEMM == "mkl-avx2" and _mkl_small(case, dtype):
        _check_backward_refused(case, settings, "kernels other than the AVX2 one")
        return
    g = torch.Generator().manual_seed(nq + nk + d)
    q = torch.randn(b, h, nq, d, generator=g).to(dtype).requires_grad_()
    k, v = (torch.randn(b, hkv, nk, d, generator=g).to(dtype).requires_grad_() for _ in range(2))
    mask = _mask(kind, b, h, nq, nk, g)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal", enable_gqa=hkv != h)
    do = torch.randn(b, h, nq, d, generator=g).to(dtype)
    o.backward(do)
    e = rs.attention(q.detach(), k.detach(), v.detach(), recipe=RECIPE, settings=settings,
                     causal=kind == "causal", causal_alignment="top-left", attn_mask=mask, backward=True, do=do)
    assert (_bits(e["o"]) == _bits(o.detach())).all()
    for name, t in (("dq", q), ("dk", k), ("dv", v)):
        assert e[name].dtype == dtype
        diff = int((_bits(e[name]) != _bits(t.grad)).sum())
        assert diff == 0, f"{name}: {diff} of {t.grad.numel()} differ"


AVX512 = {"score_product": "avx512-bf16", "pv_product": "avx512-bf16"}


@pytest.mark.parametrize("settings, shape, why", [
    ({}, (64, 64, 64, 1), "untested on AMX"),
    ({"score_product": "mkl-avx2", "pv_product": "avx512-bf16"}, (64, 64, 64, 1), "both mkl-avx2"),
    ({"score_product": "mkl-avx2", "pv_product": "mkl-avx2"}, (2, 64, 64, 1), "at least 24 x 4"),
    (AVX512, (64, 64, 16, 1), "D from 32 to 384"),
    (AVX512, (1, 64, 64, 1), "one row"),
    (AVX512, (64, 513, 64, 1), "one key"),
    ({**AVX512, "grad_product": "f64"}, (64, 64, 64, 1), "leave the backward's keys unset"),
    ({**AVX512, "o_format": "f32"}, (64, 64, 64, 1), "o_format"),
    ({**AVX512, "input": "f32", "p_format": "f32", "o_format": "f32", "ds_format": "f32", "grad_format": "f32"},
     (64, 64, 64, 1), "multiplies BF16"),
    ({"score_product": "mkl-avx2", "pv_product": "mkl-avx2", "input": "f16", "p_format": "f16", "o_format": "f16"},
     (64, 64, 64, 1), "grad_format the input's"),
])
def test_what_the_backward_does_not_model_is_refused(settings, shape, why):
    """What the probes have not covered is refused with the reason, on any CPU."""
    nq, nk, d, group = shape
    q = do = np.zeros((2, nq, d), np.float32)
    k = v = np.zeros((2 // group, nk, d), np.float32)
    with pytest.raises(ValueError, match=why):
        rs.attention(q, k, v, recipe=RECIPE, settings=settings, backward=True, do=do)


@pytest.mark.slow
def test_fit_finds_the_recipe_from_the_generic_presets(tmp_path):
    """`fit`, from every preset but torch-cpu-bf16, rediscovers PyTorch's CPU attention from a dump
    of torch's own outputs: two heads, 128 queries, 700 keys (two KV blocks), D = 80 (chunks of
    20), O and LSE; the second head's values make P V's order show. Its time: tools/bench/bench_fit.py."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 128, 80, generator=g).bfloat16()
    k, v = (torch.randn(1, 2, 700, 80, generator=g).bfloat16() for _ in range(2))
    # the second head's P V shows its order: q = 0 makes every P 1, and V's columns cancel
    # (large values and their negatives among small ones), so that no other product ties it
    q[:, 1] = 0
    big = torch.randint(2, 255, (280, 80), generator=g) * 2.0**16
    small = torch.randint(-8, 9, (140, 80), generator=g).float()
    v[0, 1] = torch.cat([big, -big, small])[torch.randperm(700, generator=g)]
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[:2]
    path = tmp_path / "cpu.safetensors"
    rs.write(path, {"q": q, "k": k, "v": v, "o": o, "lse": lse})
    presets = [r["name"] for r in rs.recipes()["recipes"] if r["name"] != RECIPE]
    r = rs.fit(path, presets=presets, max_evaluations=3000)
    assert r["exact"], r["best"]
    table = {x["name"]: x["settings"] for x in rs.recipes()["recipes"]}
    found = {**table[r["best"]["preset"]], **{k: str(v) for k, v in r["best"]["settings"].items()}}
    want = {**table[RECIPE], "score_product": GEMM, "pv_product": GEMM}
    for key in ("softmax", "score_product", "pv_product", "block_n", "input", "p_format", "o_format"):
        assert found[key] == want[key], (key, r["best"])
    e = rs.attention(q, k, v, recipe=r["best"]["preset"], settings=r["best"]["settings"])
    assert (_bits(e["o"]) == _bits(o)).all() and (_bits(e["lse"].float()) == _bits(lse)).all()


@pytest.mark.slow
def test_unpacked_256_row_blocks_at_many_threads():
    """768 queries in ATen's 256-row blocks on its unpacked path (128 heads at 1,024 threads: each
    thread's GEMM work is half the packing's): the recipe told the thread count is torch."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 128, 768, 64, generator=g).bfloat16()
    k, v = (torch.randn(1, 128, 64, 64, generator=g).bfloat16() for _ in range(2))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1024)
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[:2]
    finally:
        torch.set_num_threads(before)
    e = rs.attention(q, k, v, recipe=RECIPE, settings=_settings(1024))
    assert (_bits(e["o"]) == _bits(o)).all() and (_bits(e["lse"].float()) == _bits(lse)).all()
