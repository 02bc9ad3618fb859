"""Which settings of the recipe torch-cpu-bf16 reproduce PyTorch's CPU attention on this machine
(docs/torch-cpu.md): the BF16 GEMM ATen's kernel runs depends on the CPU."""
from __future__ import annotations

import pathlib

import torch


def _cpu() -> tuple[str, set[str]]:
    """The CPU's vendor and flags, from /proc/cpuinfo."""
    path = pathlib.Path("/proc/cpuinfo")
    if not path.exists():
        raise ValueError("cpu_settings: no /proc/cpuinfo: the recipe models Linux x86 CPUs whose flags it reads there")
    lines = path.read_text().splitlines()
    vendor = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("vendor_id")), "")
    flags = next((line.split(":", 1)[1] for line in lines if line.startswith("flags")), "")
    return vendor, set(flags.split())


def cpu_settings(dtype: torch.dtype = torch.bfloat16) -> dict[str, str]:
    """The settings that make torch-cpu-bf16 PyTorch's CPU attention here on `dtype` tensors: with
    AMX-BF16, torch's thread count (whether ATen packs its GEMM operands turns on it); on an Intel
    CPU with AVX512-BF16 and no AMX, the products avx512-bf16; on an AMD CPU with AVX-512, the
    products mkl-avx2 (MKL runs its AVX2 GEMMs there), which take FP16 and float32 as well (input,
    p_format, o_format, ds_format and grad_format f16 or f32: the forward and the backward).
    ValueError, saying why, on any other CPU or dtype: torch runs code there that the recipe does
    not model (no AVX-512; FP16 and float32 on Intel; float64)."""
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"cpu_settings: dtype {dtype}: torch-cpu-bf16 models bfloat16, and float16 and float32 on "
                         "an AMD CPU")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        raise ValueError(f"cpu_settings: torch runs its {capability} kernels on this CPU; torch-cpu-bf16 models "
                         "the AVX512 build")
    vendor, flags = _cpu()
    if dtype != torch.bfloat16:
        name = {torch.float16: "f16", torch.float32: "f32"}[dtype]
        if vendor != "AuthenticAMD":
            raise ValueError(f"cpu_settings: dtype {dtype} on this CPU ({vendor}): torch-cpu-bf16 models float16 "
                             "and float32 on an AMD CPU (MKL's AVX2 GEMMs); Intel's FP16 and float32 GEMMs are not "
                             "modelled")
        return {"score_product": "mkl-avx2", "pv_product": "mkl-avx2", "input": name, "p_format": name,
                "o_format": name, "ds_format": name, "grad_format": name}
    if "amx_bf16" in flags:
        return {"aten_threads": str(torch.get_num_threads())}
    if "avx512_bf16" in flags and vendor == "GenuineIntel":
        return {"score_product": "avx512-bf16", "pv_product": "avx512-bf16"}
    if vendor == "AuthenticAMD":
        return {"score_product": "mkl-avx2", "pv_product": "mkl-avx2"}
    raise ValueError(f"cpu_settings: this CPU ({vendor}) has neither AMX-BF16 nor Intel's AVX512-BF16, and is not "
                     "an AMD CPU, whose GEMMs torch-cpu-bf16 models")


def cpu_math_settings(dtype: torch.dtype = torch.bfloat16) -> dict[str, str]:
    """The settings that make torch-cpu-math PyTorch's CPU math path here on `dtype` tensors (what
    F.scaled_dot_product_attention runs where V's head dimension is not Q's): the input and output
    formats; the recipe's products are MKL's AVX2 SGEMM, which MKL runs on an AMD CPU. ValueError,
    saying why, on any other CPU or dtype."""
    names = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
    if dtype not in names:
        raise ValueError(f"cpu_math_settings: dtype {dtype}: torch-cpu-math models bfloat16, float16 and float32")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        raise ValueError(f"cpu_math_settings: torch runs its {capability} kernels on this CPU; torch-cpu-math models "
                         "the AVX512 build")
    vendor, _ = _cpu()
    if vendor != "AuthenticAMD":
        raise ValueError(f"cpu_math_settings: this CPU ({vendor}) is not an AMD CPU: torch-cpu-math models MKL's "
                         "SGEMM as it runs there (its AVX2 kernel); Intel's is not modelled")
    return {"input": names[dtype], "o_format": names[dtype], "grad_format": names[dtype]}
