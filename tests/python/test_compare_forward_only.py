"""compare on a dump with gradients whose backward the recipe does not model for its shape: the
forward outputs are compared and the result says the gradients were not (api/attention_calls.cpp),
as for a recipe with no backward at all; asked for by name, the gradients are refused."""
import pytest
import torch

import roundscope as rs

AVX512 = {"score_product": "avx512-bf16", "pv_product": "avx512-bf16"}


def _dump(path, nq):
    """ATen's CPU kernel's forward, emulated, beside gradients: one query row leaves ATen a one-row
    block, whose backward (the GEMV's) is not modelled."""
    g = torch.Generator().manual_seed(nq)
    q = torch.randn(1, 2, nq, 64, generator=g).bfloat16()
    k, v = (torch.randn(1, 2, 100, 64, generator=g).bfloat16() for _ in range(2))
    e = rs.attention(q, k, v, recipe="torch-cpu-bf16", settings=AVX512)
    zeros = torch.zeros_like(q)
    rs.write(path, {"q": q, "k": k, "v": v, "o": e["o"], "lse": e["lse"], "do": zeros, "dq": zeros,
                    "dk": torch.zeros_like(k), "dv": torch.zeros_like(v)})
    return path


def test_a_shape_whose_backward_is_refused_compares_the_forward(tmp_path):
    path = _dump(tmp_path / "decode.safetensors", 1)
    r = rs.compare(path, "torch-cpu-bf16", settings=AVX512)
    assert sorted(r["outputs"]) == ["lse", "o"], r["outputs"].keys()
    assert r["matched"] == r["total"] == 2 * 64 + 2, r
    assert len(r["notes"]) == 1 and "one row" in r["notes"][0] and "gradients are not compared" in r["notes"][0]
    with pytest.raises(ValueError, match="one row"):
        rs.compare(path, "torch-cpu-bf16", settings=AVX512, outputs=["o", "dq"])


def test_a_shape_whose_backward_is_modelled_compares_the_gradients(tmp_path):
    path = _dump(tmp_path / "prefill.safetensors", 40)
    r = rs.compare(path, "torch-cpu-bf16", settings=AVX512)
    assert sorted(r["outputs"]) == ["dk", "dq", "dv", "lse", "o"] and r["notes"] == [], r["outputs"].keys()
