"""FlashAttention-3's FP8 arithmetic (the recipe h100-fp8 and each of its new keys: max_offset,
row_sum=lane-tile, epilogue=fa3, exp2=ex2.approx.ftz, block_n=fa3-fp8) in the numpy flash forward
(numpy_flash.py), which shares no code with the emulator, against the emulator bit for bit.

The H100's MUFU (ex2, lg2 and rcp, .approx.ftz) comes through roundscope's C entry point
(ROUNDSCOPE_CAPI, set by ctest): the peer takes those units as the hardware's own functions, which
they are on all 2^32 inputs (test_emu_mufu_exhaustive); what is checked here is the arithmetic
around them. Products are exact (score_product and pv_product f64, numpy's float64 sums)."""
import ml_dtypes
import numpy as np
import pytest

import roundscope as rs
from numpy_flash import flash_forward
from capi import mufu_units

H, N, D = 2, 300, 16  # 300 keys: a partial last tile under every block_n below
SCALE = 0.25
F64_PRODUCTS = {"score_product": "f64", "pv_product": "f64"}


@pytest.fixture(scope="module")
def units():
    return mufu_units()


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(3)
    # a sink-like first key in every head: a large score sets the running max early
    x = [(rng.standard_normal((H, N, D)) * s).astype(np.float32) for s in (2, 2, 1)]
    x[1][:, 0, :] = x[0].mean(axis=1) * 3
    return x


def held(x, fmt):
    t = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}[fmt]
    return [a.astype(t).astype(np.float32) for a in x]


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def numpy_kernel(x, fmt, units, **choices):
    h = held(x, fmt)
    outs = [flash_forward(h[0][i], h[1][i], h[2][i], scale=SCALE, units=units, **choices) for i in range(H)]
    return np.stack([o for o, _ in outs]), np.stack([lse for _, lse in outs])


# (the recipe and its settings, the same choices in numpy_flash's words, the input format)
H100_FP8_NUMPY = dict(kv_order="reverse", block_n=160, p_format="e4m3", exp2_arg="fma", rescale_arg="raw",
                      row_sum="lane-tile", scale_log2="f64", max_offset=8, epilogue="fa3", exp2="ex2.approx.ftz")
CASES = [
    ("h100-fp8", {}, H100_FP8_NUMPY, "e4m3"),
    ("fa2-bf16", {"max_offset": 8}, dict(max_offset=8), "bf16"),
    ("fa2-bf16", {"max_offset": 8, "exp2_arg": "fma", "p_format": "e4m3", "input": "e4m3"},
     dict(max_offset=8, exp2_arg="fma", p_format="e4m3"), "e4m3"),
    ("fa2-bf16", {"row_sum": "lane-tile", "block_n": 32}, dict(row_sum="lane-tile", block_n=32), "bf16"),
    ("fa2-bf16", {"epilogue": "fa3"}, dict(epilogue="fa3"), "bf16"),
    ("fa2-bf16", {"exp2": "ex2.approx.ftz", "rescale_arg": "raw"}, dict(exp2="ex2.approx.ftz", rescale_arg="raw"),
     "bf16"),
    ("fa2-bf16", {"block_n": "fa3-fp8", "max_offset": 3, "epilogue": "fa3"},
     dict(block_n=160, max_offset=3, epilogue="fa3"), "bf16"),
]


@pytest.mark.parametrize("recipe,settings,choices,fmt", CASES,
                         ids=[f"{r}:" + ",".join(f"{k}={v}" for k, v in s.items()) for r, s, _, _ in CASES])
def test_the_numpy_kernel_equals_the_recipe(inputs, units, recipe, settings, choices, fmt):
    o, lse = numpy_kernel(inputs, fmt, units, **choices)
    e = rs.attention(*inputs, recipe=recipe, settings={**F64_PRODUCTS, **settings}, softmax_scale=SCALE)
    assert np.array_equal(bits(o), bits(e["o"])), f"{int((bits(o) != bits(e['o'])).sum())} of o's bits differ"
    assert np.array_equal(bits(lse), bits(e["lse"])), f"{int((bits(lse) != bits(e['lse'])).sum())} LSE differ"


def test_each_choice_changes_the_bits(inputs, units):
    """Negative controls: without each of h100-fp8's choices the numpy kernel no longer equals it."""
    e = rs.attention(*inputs, recipe="h100-fp8", settings=F64_PRODUCTS, softmax_scale=SCALE)
    for key, other in [("max_offset", 0), ("row_sum", "quad-ffma"), ("epilogue", "fa2"), ("exp2", "software"),
                       ("block_n", 128)]:
        o, lse = numpy_kernel(inputs, "e4m3", units, **{**H100_FP8_NUMPY, key: other})
        assert not (np.array_equal(bits(o), bits(e["o"])) and np.array_equal(bits(lse), bits(e["lse"]))), key


def test_the_offset_keeps_p_bar_of_the_max_near_2_to_the_k(inputs):
    """P-bar at the row max is 2^8 under the offset: the recipe's counters see no P-bar of 1 and
    no saturation (256 < 448), and the LSE is the offset-free recipe's to a few ulps."""
    a = rs.attention(*inputs, recipe="fa3-fp8", settings={"p_scale": 1}, softmax_scale=SCALE)
    b = rs.attention(*inputs, recipe="fa3-fp8", settings={"p_scale": 1, "max_offset": 8}, softmax_scale=SCALE)
    assert np.allclose(a["lse"], b["lse"], rtol=1e-6, atol=0)
    assert not np.array_equal(bits(a["o"]), bits(b["o"]))  # fewer of P's small values underflow


def test_refusals_name_the_key():
    q = np.zeros((1, 4, 16), np.float32)
    for settings, key in [({"softmax": "naive", "max_offset": 8}, "max_offset"),
                          ({"max_adjust": "on", "max_offset": 8}, "max_offset"),
                          ({"epilogue": "fa3", "p_scale": 256}, "epilogue"),
                          ({"epilogue": "torch-flash", "max_offset": 8}, "max_offset"),
                          ({"max_offset": 31}, "max_offset")]:
        with pytest.raises(ValueError, match=key):
            rs.attention(q, q, q, recipe="fa2-bf16", settings=settings)
    with pytest.raises(ValueError, match="backward"):
        rs.attention(q, q, q, recipe="h100-fp8", backward=True, do=q)
