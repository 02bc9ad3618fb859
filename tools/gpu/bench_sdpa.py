#!/usr/bin/env python3
"""PyTorch's SDPA backends' forward speed on one shape, for the GPU kit's phase B: each backend
(flash, cuDNN, efficient; flash and math on the CPU, the dry run) on random BF16 inputs, the
median of --repeats timed calls (CUDA events on a GPU), TFLOP/s counting 4 N^2 D multiply-adds
per head (half under the causal mask). One JSON line per backend; with --ours FILE.jsonl (from
bench_flash_gpu) each of our kernels' lines gains its ratio to every backend. With --inputs, q,
k and v come from a kit_inputs file (float32 [H, N, D], cast to BF16), the inputs bench_flash_gpu
--inputs times ours on; the shape is the file's (batch 1). With --gemm SIZE, one more line,
"torch matmul": a BF16 SIZE x SIZE x SIZE matrix product, the rate the tensor cores sustain on
this device in the same run (what sass_estimate.py's figures, at NVIDIA's quoted peak, scale by);
it is no backend to set ratios against.

    bench_sdpa.py [--batch 4] [--heads 16] [--n 4096] [--d 128] [--repeats 5] [--causal]
                  [--device cuda|cpu] [--inputs FILE.safetensors] [--ours FILE.jsonl] [--gemm SIZE]
                  [--out FILE.jsonl]
Needs torch only. Exit 0, 2 on bad arguments, 3 without CUDA where --device cuda.
"""
import json
import math
import sys
import time

from kit_files import Parser, is_same_file, json_lines, write_whole

BACKENDS = {"cuda": ("flash", "cudnn", "efficient"), "cpu": ("flash", "math")}


def timed(fn, repeats, device):
    import torch

    fn()  # the first call pays for loading and autotuning
    out = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return out


def read_inputs(path, device):
    """q, k, v of a kit_inputs file as BF16 [1, H, N, D] on the device."""
    import torch
    from safetensors.torch import load_file

    def refuse(why):
        print(f"bench_sdpa: --inputs: {path}: {why}", file=sys.stderr)
        raise SystemExit(2)

    try:
        t = load_file(str(path))
    except Exception as e:  # a missing, unreadable or corrupt file: safetensors' own message
        refuse(e)
    shapes = {tuple(t[x].shape) for x in ("q", "k", "v") if x in t}
    if len(shapes) != 1 or any(x not in t for x in ("q", "k", "v")) or len(next(iter(shapes))) != 3:
        refuse("needs q, k, v of one shape [H, N, D]")
    return tuple(t[x].unsqueeze(0).to(device, torch.bfloat16) for x in ("q", "k", "v"))


def read_ours(path):
    """bench_flash_gpu's JSON lines, checked before anything runs: one line and exit 2 where a
    line is not an object or its median_s not a positive time."""
    def refuse(why):
        print(f"bench_sdpa: --ours: {path}: {why}", file=sys.stderr)
        raise SystemExit(2)

    try:
        text = open(path, errors="replace").read()
    except OSError as e:
        refuse(e.strerror or e)
    lines = []
    for number, line, _ in json_lines(text):
        if not isinstance(line, dict):
            refuse(f"line {number} is not a JSON object")
        t = line.get("median_s")
        if "median_s" in line and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
            refuse(f"line {number}: median_s is not a positive time")
        lines.append(line)
    return lines


def gemm_line(size, repeats, device, name):
    """The "torch matmul" line: a BF16 size^3 product's median time and its rate (2 size^3 FLOPs)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(2)
    x, y = (torch.randn(size, size, generator=g).to(device, torch.bfloat16) for _ in range(2))
    line = {"kernel": "torch matmul", "gemm": [size, size, size], "device": name, "torch": torch.__version__}
    try:
        t = sorted(timed(lambda: torch.matmul(x, y), repeats, device))
        line.update(seconds=t, median_s=t[len(t) // 2], tflops=2.0 * size ** 3 / t[len(t) // 2] / 1e12)
    except Exception as e:  # recorded, as a backend's
        line["error"] = f"{type(e).__name__}: {e}"
    return line


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--inputs", help="q, k, v float32 [H, N, D] (kit_inputs), instead of random ones")
    p.add_argument("--ours", help="bench_flash_gpu's JSON lines, to set ratios against")
    p.add_argument("--gemm", type=int, help="also time a BF16 SIZE^3 matrix product (the tensor cores' rate)")
    p.add_argument("--out", help="write the JSON lines here (default: stdout)")
    a = p.parse_args(argv)
    for name in ("batch", "heads", "n", "d", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    if a.gemm is not None and not 1 <= a.gemm <= 32768:
        p.error("--gemm must be 1 to 32768")
    for name in ("inputs", "ours"):  # the lines go elsewhere than what they are made from
        if a.out and getattr(a, name) and is_same_file(a.out, getattr(a, name)):
            print(f"bench_sdpa: --out: {a.out} is the --{name} file; write the lines elsewhere", file=sys.stderr)
            return 2
    ours = read_ours(a.ours) if a.ours else []
    # torch only now: a refusal above takes no seconds to import it
    import torch
    import torch.nn.functional as F

    if a.device == "cuda" and not torch.cuda.is_available():
        print("bench_sdpa: no CUDA device", file=sys.stderr)
        return 3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kinds = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    if a.inputs:
        q, k, v = read_inputs(a.inputs, a.device)
        a.batch, a.heads, a.n, a.d = q.shape
    else:
        g = torch.Generator(device="cpu").manual_seed(1)
        shape = (a.batch, a.heads, a.n, a.d)
        q, k, v = (torch.randn(shape, generator=g).to(a.device, torch.bfloat16) for _ in range(3))
    flops = 4.0 * a.batch * a.heads * a.n * a.n * a.d * (0.5 if a.causal else 1.0)
    device = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    lines = []
    for name in BACKENDS[a.device]:
        line = {"kernel": f"torch {name}", "batch": a.batch, "heads": a.heads, "n": a.n, "d": a.d,
                "causal": a.causal, "device": device, "torch": torch.__version__}
        try:
            with sdpa_kernel(kinds[name]):
                t = sorted(timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal), a.repeats,
                                 a.device))
            line.update(seconds=t, median_s=t[len(t) // 2], tflops=flops / t[len(t) // 2] / 1e12)
        except Exception as e:  # a backend this device or shape cannot run: recorded
            line["error"] = f"{type(e).__name__}: {e}"
        lines.append(line)
    torch_lines = [x for x in lines if "median_s" in x]
    if a.gemm:
        lines.append(gemm_line(a.gemm, a.repeats, a.device, device))
    if a.ours:
        for line in ours:
            same_shape = (line.get("heads"), line.get("n"), line.get("d")) == (a.batch * a.heads, a.n, a.d)
            if "median_s" in line and same_shape:
                line["ratio_to"] = {x["kernel"]: x["median_s"] / line["median_s"] for x in torch_lines}
            lines.append(line)
    text = "".join(json.dumps(x) + "\n" for x in lines)
    if a.out:
        try:
            write_whole(a.out, text.encode())
        except OSError as e:
            print(f"bench_sdpa: --out: {a.out}: {e.strerror or e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
