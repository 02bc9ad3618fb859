"""Captures PyTorch's CPU attention (the kernel F.scaled_dot_product_attention runs on BF16, FP16 and
float32 tensors, called by name for its LSE, and its math path where V's head dimension is not Q's)
as golden files: q, k, v and the O and LSE torch gave (and dO and the gradients of some), with the
machine in the metadata, so that a CPU without that machine's GEMM still checks the recipe that models it
(tests/python/test_torch_cpu_golden.py).

    PYTHONPATH=build/python .venv/bin/python tools/torch_cpu_capture.py OUT_DIR

Each file holds one shape (those the recipe refuses with this CPU's settings are left out, saying
so); its metadata names the recipe settings that reproduce it on this CPU
(`settings`: KEY=VALUE, comma-separated), torch's version and thread count, and the CPU's model and
the flags that choose oneDNN's GEMM."""
import pathlib
import platform
import sys

import torch

import roundscope as rs
import roundscope.torch as rst

# (name, heads, Nq, Nk, D, causal): S over D of 48 to 128, P V over whole (512) and partial KV blocks
SHAPES = [
    ("two-blocks", 1, 100, 768, 64, False),  # 512 + 256 keys
    ("causal", 1, 130, 600, 48, True),  # 512 + 88 keys under ATen's causal mask (Nq != Nk: top-left)
    ("one-block", 2, 40, 200, 80, False),  # 200 keys, D = 80
    ("odd-halves", 1, 64, 390, 320, False),  # P V over two blocks of 195 on AVX512-BF16, D = 320
    ("decode", 4, 1, 600, 64, False),  # one query: the GEMV, on 512 + 88 keys
    ("causal-blocks", 2, 128, 600, 48, True),  # whole query blocks under the causal mask (MKL's AVX2 GEMM)
]
# (name, heads, Nq, Nk, D, causal): the backward over several query blocks (dK and dV summed in
# BF16) and two KV blocks (dQ summed across them)
BACKWARD_SHAPES = [
    ("backward", 2, 200, 600, 64, False),
]
# (name, dtype, heads, Nq, Nk, D, causal), captured after the above: a last KV block of an odd
# 321 keys (MKL's AVX2 GEMM sums its last key alone), and FP16 and float32, where the recipe models them
MORE_SHAPES = [
    ("odd-tail", torch.bfloat16, 1, 64, 833, 64, False),
    ("fp16-odd-tail", torch.float16, 2, 100, 833, 64, False),
    ("fp16-causal-blocks", torch.float16, 2, 128, 600, 48, True),
    ("fp32-odd-tail", torch.float32, 2, 100, 833, 64, False),
    ("fp32-causal-blocks", torch.float32, 2, 128, 600, 48, True),
]
# (name, dtype, heads, Nq, Nk, D, causal), captured last: the FP16 and float32 backward (their
# gradients added by ATen's own GEMM and by SGEMM) over two query and two KV blocks, causal
# (name, dtype, heads, Nq, Nk, D, D_v, causal), captured last: PyTorch's math path (V's head
# dimension not Q's), which torch-cpu-math models, forward and backward; it writes no LSE
MATH_SHAPES = [
    ("math-fp32", torch.float32, 2, 100, 600, 96, 64, True),
    ("math-fp16", torch.float16, 2, 64, 333, 64, 32, False),
]
MORE_BACKWARD_SHAPES = [
    ("fp16-backward", torch.float16, 2, 128, 600, 64, True),
    ("fp32-backward", torch.float32, 2, 128, 600, 64, True),
]


def cpu() -> tuple[str, str]:
    info = pathlib.Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = set(next(line for line in info.splitlines() if line.startswith("flags")).split(":", 1)[1].split())
    return model, " ".join(sorted(f for f in flags if f.startswith(("avx512", "amx"))))


def settings(dtype: torch.dtype = torch.bfloat16) -> str:
    try:
        return ",".join(f"{key}={value}" for key, value in rst.cpu_settings(dtype).items())
    except ValueError as e:
        sys.exit(f"torch_cpu_capture.py: {e}")


def refusal(h: int, nq: int, nk: int, d: int, causal: bool, backward: bool = False,
            dtype: torch.dtype = torch.bfloat16) -> str:
    """Why the recipe refuses this shape (or dtype) with this CPU's settings, or ""."""
    z = torch.zeros(h, nq, d)
    try:
        rs.attention(z, torch.zeros(h, nk, d), torch.zeros(h, nk, d), recipe="torch-cpu-bf16",
                     settings=rst.cpu_settings(dtype), causal=causal, causal_alignment="top-left", backward=backward,
                     do=z if backward else None)
    except ValueError as e:
        return str(e)
    return ""


def capture_forward(path: pathlib.Path, q, k, v, causal: bool, model: str, flags: str) -> None:
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)[:2]
    rs.write(path, {"q": q, "k": k, "v": v, "o": o, "lse": lse},
             {"causal": str(causal).lower(), "causal_alignment": "top-left", "source": "torch CPU SDPA",
              "recipe": "torch-cpu-bf16", "settings": settings(q.dtype), "torch_version": torch.__version__,
              "torch_threads": str(torch.get_num_threads()), "cpu": model, "cpu_flags": flags,
              "machine": platform.machine()})
    print(path)


def capture_backward(path: pathlib.Path, dtype: torch.dtype, shape: tuple, g: torch.Generator, model: str,
                     flags: str) -> None:
    """Autograd through F.scaled_dot_product_attention: q, k, v, O, LSE, dO and the gradients."""
    h, nq, nk, d, causal = shape
    q, k, v = (torch.randn(1, h, n, d, generator=g).to(dtype).requires_grad_() for n in (nq, nk, nk))
    if why := refusal(h, nq, nk, d, causal, backward=True, dtype=dtype):
        print(f"{path.stem}: not captured: {why}")
        return
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    do = torch.randn(1, h, nq, d, generator=g).to(dtype)
    o.backward(do)
    lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q.detach(), k.detach(), v.detach(), 0.0,
                                                                      causal)[1]
    tensors = {"q": q.detach(), "k": k.detach(), "v": v.detach(), "o": o.detach(), "lse": lse, "do": do,
               "dq": q.grad, "dk": k.grad, "dv": v.grad}
    rs.write(path, tensors,
             {"causal": str(causal).lower(), "causal_alignment": "top-left", "source": "torch CPU SDPA backward",
              "recipe": "torch-cpu-bf16", "settings": settings(dtype), "torch_version": torch.__version__,
              "torch_threads": str(torch.get_num_threads()), "cpu": model, "cpu_flags": flags,
              "machine": platform.machine()})
    print(path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_cpu_capture.py OUT_DIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    model, flags = cpu()
    settings()  # exits where the recipe has no settings for this CPU
    g = torch.Generator().manual_seed(11)
    for name, h, nq, nk, d, causal in SHAPES:
        q = torch.randn(1, h, nq, d, generator=g).bfloat16()
        k, v = (torch.randn(1, h, nk, d, generator=g).bfloat16() for _ in range(2))
        if why := refusal(h, nq, nk, d, causal):
            print(f"{name}: not captured: {why}")
            continue
        capture_forward(out / f"{name}.safetensors", q, k, v, causal, model, flags)
    for name, h, nq, nk, d, causal in BACKWARD_SHAPES:
        capture_backward(out / f"{name}.safetensors", torch.bfloat16, (h, nq, nk, d, causal), g, model, flags)
    for name, dtype, h, nq, nk, d, causal in MORE_SHAPES:
        q = torch.randn(1, h, nq, d, generator=g).to(dtype)
        k, v = (torch.randn(1, h, nk, d, generator=g).to(dtype) for _ in range(2))
        if name == "odd-tail":
            # half the rows with P = 1 (q = 0) over -2^24, 2^24 and 1 at the last block's first, middle
            # and last keys: their O is 1 / 833 only where the last key is summed alone
            last = nk % 512
            q[..., : nq // 2, :] = 0
            v[..., nk - last, :], v[..., nk - last + last // 2, :], v[..., nk - 1, :] = -(2.0**24), 2.0**24, 1
        if why := refusal(h, nq, nk, d, causal, dtype=dtype):
            print(f"{name}: not captured: {why}")
            continue
        capture_forward(out / f"{name}.safetensors", q, k, v, causal, model, flags)
    for name, dtype, h, nq, nk, d, causal in MORE_BACKWARD_SHAPES:
        capture_backward(out / f"{name}.safetensors", dtype, (h, nq, nk, d, causal), g, model, flags)
    for name, dtype, h, nq, nk, d, dv, causal in MATH_SHAPES:
        q, k = (torch.randn(1, h, n, d, generator=g).to(dtype).requires_grad_() for n in (nq, nk))
        v = torch.randn(1, h, nk, dv, generator=g).to(dtype).requires_grad_()
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # the math path
        do = torch.randn(1, h, nq, dv, generator=g).to(dtype)
        o.backward(do)
        math = ",".join(f"{key}={value}" for key, value in rst.cpu_math_settings(dtype).items())
        tensors = {"q": q.detach(), "k": k.detach(), "v": v.detach(), "o": o.detach(), "do": do, "dq": q.grad,
                   "dk": k.grad, "dv": v.grad}
        rs.write(out / f"{name}.safetensors", tensors,
                 {"causal": str(causal).lower(), "causal_alignment": "top-left", "source": "torch CPU SDPA math path",
                  "recipe": "torch-cpu-math", "settings": math, "torch_version": torch.__version__,
                  "torch_threads": str(torch.get_num_threads()), "cpu": model, "cpu_flags": flags,
                  "machine": platform.machine()})
        print(out / f"{name}.safetensors")


if __name__ == "__main__":
    main()
