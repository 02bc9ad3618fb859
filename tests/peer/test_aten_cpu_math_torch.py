"""The torch-cpu-math recipe against PyTorch's own CPU math path: F.scaled_dot_product_attention on
a CPU runs attention.cpp's _scaled_dot_product_attention_math where its flash kernel does not take
the call (V's head dimension other than Q's; torch._fused_sdp_choice says MATH), and with
SDPBackend.MATH forced. Its O equals the recipe's bit for bit on BF16, FP16 and float32, over
shapes that reach every rule the recipe holds: fewer and more than 16 keys (vec::reduce_all's
sequential and lane sums), a tail past the last whole vector, keys past 192 and 384 (MKL's K blocks
in P V), ATen's causal mask, a boolean padding mask (a fully masked row: _safe_softmax's zeros),
an additive mask, grouped-query heads and a scale the caller gives; and dQ, dK and dV of autograd
through it (a group's float32 dK and dV added in head order before the cast).
MKL's SGEMM is modelled as it runs on an AMD CPU (mkl-avx2); elsewhere the tests skip, saying why
(roundscope.torch.cpu_math_settings)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import roundscope as rs
import roundscope.torch as rst

RECIPE = "torch-cpu-math"


def _why():
    try:
        rst.cpu_math_settings()
    except ValueError as e:
        return str(e)
    return ""


WHY = _why()
pytestmark = pytest.mark.skipif(WHY != "", reason=WHY)
DTYPES = [torch.bfloat16, torch.float16, torch.float32]

# (batch, heads, kv heads, Nq, Nk, D, D_v, mask, scale)
CASES = [
    (1, 2, 2, 40, 100, 64, 32, None, None),  # 100 keys: six vectors and a tail of 4
    (1, 1, 1, 16, 13, 32, 16, None, None),  # 13 keys: the sequential sum
    (1, 1, 1, 12, 16, 48, 24, None, None),  # 16 keys, 12 queries (the SGEMM's edge)
    (2, 2, 2, 64, 300, 64, 48, "causal", None),  # P V over two halves of 150 keys; top-left causal
    (2, 2, 2, 100, 700, 128, 64, "padding", None),  # P V in blocks of 192; a fully masked row
    (1, 1, 1, 96, 500, 48, 80, "additive", None),  # D_v above D
    (1, 4, 2, 50, 200, 192, 128, None, None),  # grouped heads; MLA's 192 and 128
    (1, 8, 1, 24, 128, 64, 32, "causal", None),  # a group of 8: its dK and dV summed in order
    (1, 2, 2, 32, 1000, 64, 32, None, 0.3),  # a scale the caller gives: its root in double
]


def _case_id(case):
    b, h, hkv, nq, nk, d, dv, mask, scale = case
    return f"B{b}H{h}/{hkv}-{nq}x{nk}-D{d}/{dv}-{mask or 'nomask'}" + (f"-s{scale}" if scale else "")


def _bits(t):
    return t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy()


def _operands(case, dtype):
    b, h, hkv, nq, nk, d, dv, kind, scale = case
    g = torch.Generator().manual_seed(nq * 7 + nk + d)
    q = torch.randn(b, h, nq, d, generator=g).to(dtype)
    k = torch.randn(b, hkv, nk, d, generator=g).to(dtype)
    v = torch.randn(b, hkv, nk, dv, generator=g).to(dtype)
    mask = None
    if kind == "padding":
        mask = torch.ones(b, 1, nq, nk, dtype=torch.bool)
        mask[0, ..., nk - 37:] = False
        mask[-1, :, 3, :] = False  # a row with no key: _safe_softmax gives 0
    elif kind == "additive":
        mask = torch.randn(1, 1, nq, nk, generator=g) * 3
    return q, k, v, mask


def _emulate(q, k, v, mask, case, dtype, settings=None, do=None):
    kind, scale = case[7], case[8]
    return rs.attention(q, k, v, recipe=RECIPE, settings=settings or rst.cpu_math_settings(dtype),
                        causal=kind == "causal", causal_alignment="top-left", attn_mask=mask, softmax_scale=scale,
                        backward=do is not None, do=do)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_recipe_is_pytorch_cpu_math_path_bit_for_bit(case, dtype):
    q, k, v, mask = _operands(case, dtype)
    kind, scale, hkv, h = case[7], case[8], case[2], case[1]
    kx, vx = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
    assert torch._fused_sdp_choice(q, kx, vx, mask, 0.0, kind == "causal") == SDPBackend.MATH.value
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal", scale=scale,
                                       enable_gqa=hkv != h)
    e = _emulate(q, k, v, mask, case, dtype)
    assert e["o"].dtype == dtype
    diff = int((_bits(e["o"]) != _bits(o)).sum())
    assert diff == 0, f"{diff} of {o.numel()} O values differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_backward_is_autograd_through_the_math_path_bit_for_bit(case, dtype):
    q, k, v, mask = _operands(case, dtype)
    kind, scale, hkv, h = case[7], case[8], case[2], case[1]
    do = torch.randn(*q.shape[:-1], v.shape[-1], generator=torch.Generator().manual_seed(5)).to(dtype)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal", scale=scale,
                                       enable_gqa=hkv != h)
    o.backward(do)
    e = _emulate(q.detach(), k.detach(), v.detach(), mask, case, dtype, do=do)
    for name, t in (("dq", q), ("dk", k), ("dv", v)):
        assert e[name].dtype == dtype
        diff = int((_bits(e[name]) != _bits(t.grad)).sum())
        assert diff == 0, f"{name}: {diff} of {t.grad.numel()} differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16", "fp32"])
def test_the_forced_math_backend_is_the_same_path(dtype):
    """With SDPBackend.MATH forced, D_v = D runs the same composition."""
    case = (1, 2, 2, 64, 333, 64, 64, "causal", None)
    q, k, v, _ = _operands(case, dtype)
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (_bits(_emulate(q, k, v, None, case, dtype)["o"]) == _bits(o)).all()


def test_the_inputs_tell_the_sgemm_and_the_softmax_apart():
    """A negative control: with exact products, or with the GPU math path's softmax and products,
    the recipe misses torch's bits on float32."""
    case = (1, 2, 2, 64, 700, 64, 32, None, None)
    q, k, v, _ = _operands(case, torch.float32)
    o = F.scaled_dot_product_attention(q, k, v)
    base = rst.cpu_math_settings(torch.float32)
    for other in ({"score_product": "f64", "pv_product": "f64"},):
        e = _emulate(q, k, v, None, case, torch.float32, {**base, **other})
        assert (_bits(e["o"]) != _bits(o)).sum() > 0, other
    g = rs.attention(q, k, v, recipe="torch-math-sm90", settings={"input": "f32", "o_format": "f32"})
    assert (_bits(g["o"]) != _bits(o)).sum() > 0


@pytest.mark.parametrize("nq, nk, why", [
    (5, 100, "S's GEMM has 100 x 5"),  # 5 queries: not 4, 8 or at least 12 columns
    (16, 8, "S's GEMM has 8 x 16"),  # 8 keys: under 12 rows
])
def test_sgemm_shapes_mkl_runs_with_other_kernels_are_refused(nq, nk, why):
    z = np.zeros((1, nq, 64), np.float32)
    with pytest.raises(ValueError, match=why):
        rs.attention(z, np.zeros((1, nk, 64), np.float32), np.zeros((1, nk, 32), np.float32), recipe=RECIPE)


@pytest.mark.parametrize("d, settings, why", [
    (8, {}, "D of at least 12"),
    (64, {"ds_format": "bf16"}, "ds_format f32"),
    (64, {"grad_format": "f32"}, "grad_format the input's"),
    (64, {"grad_product": "f64"}, "leave the backward's keys unset"),
])
def test_what_the_backward_does_not_model_is_refused(d, settings, why):
    z = np.zeros((1, 16, d), np.float32)
    with pytest.raises(ValueError, match=why):
        rs.attention(z, np.zeros((1, 20, d), np.float32), np.zeros((1, 20, 32), np.float32), recipe=RECIPE,
                     settings=settings, backward=True, do=np.zeros((1, 16, 32), np.float32))


def test_the_flash_recipe_points_to_this_one():
    z = np.zeros((1, 16, 64), np.float32)
    with pytest.raises(ValueError, match="torch-cpu-math"):
        rs.attention(z, np.zeros((1, 20, 64), np.float32), np.zeros((1, 20, 32), np.float32),
                     recipe="torch-cpu-bf16")
