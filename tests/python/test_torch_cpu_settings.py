"""roundscope.torch.cpu_settings: the settings of torch-cpu-bf16 for the CPU it reads, or a
ValueError saying why there are none (python/roundscope/_torch_cpu.py)."""
import pytest
import torch

import roundscope._torch_cpu as tc
import roundscope.torch as rst


@pytest.fixture
def cpu(monkeypatch):
    def set_cpu(capability, vendor, flags):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
        monkeypatch.setattr(tc, "_cpu", lambda: (vendor, set(flags.split())))
    return set_cpu


def test_amx_takes_torch_thread_count(cpu):
    cpu("AVX512", "GenuineIntel", "avx512f avx512_bf16 amx_bf16 amx_tile")
    assert rst.cpu_settings() == {"aten_threads": str(torch.get_num_threads())}


def test_intel_avx512_bf16_takes_its_products(cpu):
    cpu("AVX512", "GenuineIntel", "avx512f avx512_bf16 avx512_fp16")
    assert rst.cpu_settings() == {"score_product": "avx512-bf16", "pv_product": "avx512-bf16"}


def test_amd_takes_mkls_avx2_products(cpu):
    """MKL runs its AVX2 GEMM on an AMD CPU, AVX512-BF16 or not; torch's own kernels are AVX-512's."""
    for flags in ("avx512f avx512_bf16", "avx512f"):
        cpu("AVX512", "AuthenticAMD", flags)
        assert rst.cpu_settings() == {"score_product": "mkl-avx2", "pv_product": "mkl-avx2"}


def test_amd_takes_fp16_and_float32_too(cpu):
    """MKL's FP16 GEMM and SGEMM run AVX2 kernels of the same blocks there; the recipe then takes
    the dtype throughout."""
    cpu("AVX512", "AuthenticAMD", "avx512f avx512_bf16")
    for dtype, name in ((torch.float16, "f16"), (torch.float32, "f32")):
        assert rst.cpu_settings(dtype) == {"score_product": "mkl-avx2", "pv_product": "mkl-avx2",
                                           "input": name, "p_format": name, "o_format": name,
                                           "ds_format": name, "grad_format": name}


@pytest.mark.parametrize("vendor, flags, dtype, why", [
    ("GenuineIntel", "avx512f avx512_bf16 amx_bf16", torch.float16, "Intel's FP16 and float32 GEMMs are not"),
    ("GenuineIntel", "avx512f avx512_bf16 avx512_fp16", torch.float16, "Intel's FP16 and float32 GEMMs are not"),
    ("GenuineIntel", "avx512f avx512_bf16", torch.float32, "Intel's FP16 and float32 GEMMs are not modelled"),
    ("AuthenticAMD", "avx512f avx512_bf16", torch.float64, "dtype torch.float64"),
])
def test_dtypes_it_does_not_model_are_refused(cpu, vendor, flags, dtype, why):
    cpu("AVX512", vendor, flags)
    with pytest.raises(ValueError, match=why):
        rst.cpu_settings(dtype)


@pytest.mark.parametrize("capability, vendor, flags, why", [
    ("AVX2", "GenuineIntel", "avx2", "AVX2 kernels"),
    ("AVX2", "AuthenticAMD", "avx2", "AVX2 kernels"),
    ("AVX512", "HygonGenuine", "avx512f avx512_bf16", "not an AMD CPU"),
    ("AVX512", "GenuineIntel", "avx512f", "neither AMX-BF16 nor"),
])
def test_other_cpus_are_refused_with_the_reason(cpu, capability, vendor, flags, why):
    cpu(capability, vendor, flags)
    with pytest.raises(ValueError, match=why):
        rst.cpu_settings()


def test_each_cpus_settings_are_taken_by_the_recipe(cpu):
    """Each CPU's settings run the recipe (on any machine: the emulator does not need that CPU)."""
    import numpy as np

    import roundscope as rs
    z = np.zeros((1, 40, 64), np.float32)
    for vendor, flags in (("GenuineIntel", "avx512_bf16 amx_bf16"), ("GenuineIntel", "avx512_bf16"),
                          ("AuthenticAMD", "avx512_bf16")):
        cpu("AVX512", vendor, flags)
        out = rs.attention(z, z, z, recipe="torch-cpu-bf16", settings=rst.cpu_settings())
        assert out["o"].shape == (1, 40, 64)
    for dtype in (torch.float16, torch.float32):
        out = rs.attention(z, z, z, recipe="torch-cpu-bf16", settings=rst.cpu_settings(dtype))
        assert out["o"].shape == (1, 40, 64)


@pytest.mark.parametrize("settings, why", [
    ({"input": "f16", "p_format": "f16", "o_format": "f16"}, "the CPU's BF16 GEMM .amx, avx512-bf16."),
    ({"score_product": "avx512-bf16", "pv_product": "avx512-bf16", "input": "f16", "p_format": "f16"},
     "multiplies BF16 .input bf16."),
    ({"score_product": "mkl-avx2", "pv_product": "mkl-avx2", "input": "e4m3", "p_format": "e4m3"},
     "mkl-avx2. multiplies BF16, FP16 or float32"),
    ({"score_product": "mkl-avx2", "pv_product": "mkl-avx2", "input": "f16"}, "P in V's format"),
    ({"score_product": "mkl-avx2", "pv_product": "mkl-avx2", "input": "e5m2", "p_format": "e5m2"},
     "multiplies BF16, FP16 or float32"),
    ({"score_product": "f64", "pv_product": "f64", "input": "e4m3", "p_format": "e4m3"},
     "runs BF16, FP16 and float32 inputs"),
])
def test_the_recipe_refuses_formats_its_gemm_does_not_take(settings, why):
    """FP16 and float32 are modelled with MKL's AVX2 GEMMs only (an AMD CPU), P in V's format."""
    import numpy as np

    import roundscope as rs
    z = np.zeros((1, 40, 64), np.float32)
    with pytest.raises(ValueError, match=why):
        rs.attention(z, z, z, recipe="torch-cpu-bf16", settings=settings)


def test_the_recipe_refuses_a_value_head_dimension_of_its_own():
    """F.scaled_dot_product_attention runs PyTorch's math path on the CPU where V's head dimension
    differs from Q's (torch._fused_sdp_choice gives MATH), so the flash kernel's recipe refuses it."""
    import numpy as np

    import roundscope as rs
    q, v = np.zeros((1, 40, 64), np.float32), np.zeros((1, 100, 32), np.float32)
    with pytest.raises(ValueError, match="math path.*torch-cpu-math"):
        rs.attention(q, np.zeros((1, 100, 64), np.float32), v, recipe="torch-cpu-bf16")
    assert torch._fused_sdp_choice(*(torch.zeros(1, 1, n, d).bfloat16() for n, d in ((40, 64), (100, 64), (100, 32)))) \
        == 0  # SDPBackend.MATH: the fact the refusal rests on, on the installed torch


def test_the_math_paths_settings_are_an_amd_cpus(cpu):
    """torch-cpu-math models MKL's SGEMM as it runs on an AMD CPU: the settings name the dtype there
    (and run the recipe on any machine), and raise, saying why, on other CPUs and dtypes."""
    import numpy as np

    import roundscope as rs
    cpu("AVX512", "AuthenticAMD", "avx512f avx512_bf16")
    q, k, v = np.zeros((1, 16, 64), np.float32), np.zeros((1, 20, 64), np.float32), np.zeros((1, 20, 32), np.float32)
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
        assert rst.cpu_math_settings(dtype) == {"input": name, "o_format": name, "grad_format": name}
        assert rs.attention(q, k, v, recipe="torch-cpu-math", settings=rst.cpu_math_settings(dtype))["o"].shape \
            == (1, 16, 32)
    with pytest.raises(ValueError, match="dtype torch.float64"):
        rst.cpu_math_settings(torch.float64)
    cpu("AVX512", "GenuineIntel", "avx512f avx512_bf16 amx_bf16")
    with pytest.raises(ValueError, match="not an AMD CPU"):
        rst.cpu_math_settings()
    cpu("AVX2", "AuthenticAMD", "avx2")
    with pytest.raises(ValueError, match="AVX2 kernels"):
        rst.cpu_math_settings()
