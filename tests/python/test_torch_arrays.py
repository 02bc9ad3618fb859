"""Torch tensors in, torch tensors out: every function that takes an array gives a torch caller
torch tensors of torch's own types (bit patterns where torch has none) with the bits a numpy
caller gets; to_torch and to_numpy convert without changing a bit."""
import ml_dtypes
import numpy as np
import pytest
import torch

import roundscope as rs
from files_by_hand import same_bits

# (numpy or ml_dtypes type, torch type it becomes: None for uint8 bit patterns)
TYPES = [(np.float64, torch.float64), (np.float32, torch.float32), (np.float16, torch.float16),
         (ml_dtypes.bfloat16, torch.bfloat16), (ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn),
         (ml_dtypes.float8_e5m2, torch.float8_e5m2), (ml_dtypes.float8_e4m3fnuz, torch.float8_e4m3fnuz),
         (ml_dtypes.float8_e5m2fnuz, torch.float8_e5m2fnuz), (ml_dtypes.float8_e8m0fnu, torch.float8_e8m0fnu),
         (ml_dtypes.float6_e2m3fn, None), (ml_dtypes.float6_e3m2fn, None), (ml_dtypes.float4_e2m1fn, None),
         (np.int8, torch.int8), (np.uint8, torch.uint8), (np.int32, torch.int32), (np.bool_, torch.bool)]


def every_pattern(dtype):
    """Every bit pattern of a type of 8 bits, or a spread of 16-bit ones and values of wider ones."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 1:
        bits = np.arange(256, dtype=np.uint8)
        return (bits & 1).astype(np.bool_) if dtype == np.bool_ else bits.view(dtype)
    if dtype.itemsize == 2:
        return np.arange(0, 65536, 7, dtype=np.uint16).view(dtype)
    return np.random.default_rng(1).integers(0, 2**31, 1000).astype(np.uint64).astype(
        np.dtype(f"u{dtype.itemsize}")).view(dtype)


@pytest.mark.parametrize("dtype,torch_dtype", TYPES, ids=lambda t: getattr(t, "__name__", str(t)))
def test_to_torch_and_back_keep_every_bit_and_share_memory(dtype, torch_dtype):
    a = every_pattern(dtype).reshape(-1, 1)
    t = rs.to_torch(a)
    assert t.dtype == (torch_dtype or torch.uint8) and tuple(t.shape) == a.shape
    back = rs.to_numpy(t)
    want = a.view(np.uint8) if torch_dtype is None else a  # torch has no such type: its bit patterns
    assert same_bits(back, want)
    assert np.shares_memory(back, a)  # no copy either way on the CPU
    assert same_bits(rs.to_numpy(t.T), want.T)  # a strided tensor is read in its logical order


def test_to_torch_refuses_what_has_no_format():
    with pytest.raises(TypeError, match="complex"):
        rs.to_torch(np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="meta"):
        rs.to_numpy(torch.ones(2, device="meta"))


def test_cast_and_decode_give_torch_tensors_for_torch_tensors():
    x = torch.randn(4, 33, generator=torch.Generator().manual_seed(3)) * 100
    for to, torch_dtype in [("e4m3", torch.float8_e4m3fn), ("bf16", torch.bfloat16), ("e8m0", torch.float8_e8m0fnu),
                            ("e2m1", torch.uint8), ("ue4m3", torch.uint8)]:
        got = rs.cast(x, to, rounding="sr", seed=5)
        want = rs.cast(x.numpy(), to, rounding="sr", seed=5)
        assert isinstance(got, torch.Tensor) and got.dtype == torch_dtype and got.device == x.device, to
        assert same_bits(rs.to_numpy(got), want.view(np.uint8) if torch_dtype == torch.uint8 else want), to
    y = rs.cast(x, "e4m3")
    values = rs.decode(y)
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float64
    assert torch.equal(values, y.double())  # torch's own widening agrees
    assert isinstance(rs.cast(x.numpy(), "e4m3"), np.ndarray)  # numpy in, numpy out


def test_attention_truth_and_mma_give_torch_tensors_for_torch_tensors():
    g = torch.Generator().manual_seed(4)
    q, k, v, do = (torch.randn(2, 40, 16, generator=g).to(torch.bfloat16) for _ in range(4))
    got = rs.attention(q, k, v, recipe="fa3-fp8", backward=True, do=do, truth=True)
    want = rs.attention(*(rs.to_numpy(t) for t in (q, k, v)), recipe="fa3-fp8", backward=True, do=rs.to_numpy(do),
                        truth=True)
    assert got["errors"] == want["errors"]
    for name in ("o", "lse", "dq", "dk", "dv", "delta"):
        assert isinstance(got[name], torch.Tensor), name
        assert same_bits(rs.to_numpy(got[name]), want[name]), name
    exact = rs.truth(q, k, v)
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in exact.values())
    a = torch.randn(16, 8, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(8, 8, generator=g).to(torch.float8_e4m3fn)
    d = rs.mma(a, b)
    assert isinstance(d, torch.Tensor) and same_bits(rs.to_numpy(d), rs.mma(rs.to_numpy(a), rs.to_numpy(b)))


@pytest.mark.parametrize("format", ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4"])
def test_block_quantization_of_torch_tensors(format):
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(5))
    got = rs.mx.quantize(x, format)
    want = rs.mx.quantize(x.numpy(), format)
    assert isinstance(got.elements, torch.Tensor) and isinstance(got.scales, torch.Tensor)
    assert rs.to_numpy(got.elements).tobytes() == want.elements.tobytes()
    assert rs.to_numpy(got.scales).tobytes() == want.scales.tobytes()
    values = rs.mx.dequantize(got)
    assert isinstance(values, torch.Tensor) and same_bits(rs.to_numpy(values), rs.mx.dequantize(want))
