"""The Python package's overhead, against baselines run in the same run of this script.

    PYTHONPATH=build/python .venv/bin/python tools/bench/bench_python.py [BUILD_DIR]

1. cast of 2^24 float32 (64 MiB, streaming) into bf16 and e4m3 from Python, against
   bench_cast's streaming rate of the same cast on the same threads.
2. the cost of one call casting one element, against the core's call alone (and np.empty(1) for scale).
3. attention (forward, and forward + backward) of one BF16 head, N = 2048, D = 128, fa2-bf16,
   through roundscope.attention, against bench_flash's emulator time at the same size.
4. torch in, torch out: the cast of a 2^24 torch tensor against the same cast of the numpy array.
5. a training step (forward and backward) of a two-block BF16 model whose attention calls
   F.scaled_dot_product_attention, under roundscope.torch.emulate, against the same model calling
   roundscope.torch.scaled_dot_product_attention directly (the same bits), at N = 512 and at a
   tiny N = 16 where the per-call cost shows; PyTorch's own SDPA for scale.
Prints the Highway target, the CPU and a table of ratios (docs/python.md has it).
"""
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

import ml_dtypes
import numpy as np

import roundscope as rs

BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build")


def best(f, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def bench_cast_rates():
    out = subprocess.run([BUILD / "tools" / "bench" / "bench_cast"], capture_output=True, text=True, check=True).stdout
    rates = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) > 4 and f[1] == "rne" and f[2] == "streaming":
            rates[(f[0], int(f[3]))] = float(f[4]) * 1e9
    return rates


def bench_flash_seconds(n):
    out = subprocess.run([BUILD / "tools" / "bench" / "bench_flash", "--n", str(n)], capture_output=True, text=True,
                         check=True).stdout
    forward = float(re.search(r"^forward\s+([0-9.]+)s", out, re.M).group(1))
    both = float(re.search(r"^forward \+ backward\s+([0-9.]+)s", out, re.M).group(1))
    return forward, both, out


def torch_rows(x, threads):
    import torch
    import torch.nn.functional as F

    import roundscope.torch as rst

    rows = []
    t = torch.from_numpy(x)
    numpy_time = best(lambda: rs.cast(x, "bf16", threads=threads))
    torch_time = best(lambda: rs.cast(t, "bf16", threads=threads))
    rows.append((f"cast 2^24 f32 -> bf16, {threads} thread(s), torch tensor in and out", f"{torch_time * 1e3:.1f} ms",
                 f"{numpy_time * 1e3:.1f} ms (numpy array)", f"{torch_time / numpy_time:.2f}x"))

    class Block(torch.nn.Module):
        def __init__(self, width, heads, attention):
            super().__init__()
            self.qkv, self.out, self.heads, self.attention = torch.nn.Linear(width, 3 * width), \
                torch.nn.Linear(width, width), heads, attention

        def forward(self, h):
            b, n, w = h.shape
            q, k, v = (z.reshape(b, n, self.heads, -1).transpose(1, 2) for z in self.qkv(h).chunk(3, dim=-1))
            return h + self.out(self.attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, w))

    def model(attention):
        torch.manual_seed(0)
        return torch.nn.Sequential(*(Block(64, 2, attention) for _ in range(2))).to(torch.bfloat16)

    def step(m, h):
        m.zero_grad()
        m(h).float().square().mean().backward()

    for n, repeat in ((512, 3), (16, 20)):
        h = torch.randn(2, n, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
        through_sdpa = model(lambda *a, **k: F.scaled_dot_product_attention(*a, **k))
        direct = model(rst.sdpa("fa2-bf16"))

        def under_emulate():
            with rst.emulate("fa2-bf16"):
                step(through_sdpa, h)
        emulated = best(under_emulate, repeat)
        called = best(lambda: step(direct, h), repeat)
        plain = best(lambda: step(through_sdpa, h), repeat)
        rows.append((f"training step, 2 blocks, B 2, H 2, N = {n}, D 32: under emulate(\"fa2-bf16\")",
                     f"{emulated * 1e3:.2f} ms", f"{called * 1e3:.2f} ms (rst.scaled_dot_product_attention)",
                     f"{emulated / called:.2f}x"))
        rows.append((f"  for scale: PyTorch's own SDPA, N = {n}", f"{plain * 1e3:.2f} ms", "", ""))
    return rows


def main():
    threads = os.cpu_count()
    print(f"CPU: {cpu_name()}, {threads} hardware threads")
    rows = []

    rates = bench_cast_rates()
    x = np.random.default_rng(0).standard_normal(2 ** 24).astype(np.float32)
    for to in ("bf16", "e4m3"):
        out = rs.cast(x, to)
        for t in (1, threads):
            base = rates[(to, t)]
            for how, call in (("new array", lambda: rs.cast(x, to, threads=t)),
                              ("out=", lambda: rs.cast(x, to, threads=t, out=out))):
                python_rate = x.size / best(call)
                rows.append((f"cast 2^24 f32 -> {to}, {t} thread(s), {how}", f"{python_rate / 1e9:.3f} G/s",
                             f"{base / 1e9:.3f} G/s (bench_cast streaming)", f"{python_rate / base:.0%}"))

    one = np.array([1.1], np.float32)
    n = 100_000
    call = best(lambda: [rs.cast(one, "e4m3") for _ in range(n)]) / n
    bare = best(lambda: [rs._core.cast_numpy(one, "e4m3", None, None, "cuda", False, False, 0, 1.0, 0)
                         for _ in range(n)]) / n
    empty = best(lambda: [np.empty(1, np.float32) for _ in range(n)]) / n
    rows.append(("cast of one element (rs.cast)", f"{call * 1e6:.2f} us", f"{bare * 1e6:.2f} us (the core's call)",
                 f"{call / bare:.2f}x"))
    rows.append(("for scale: np.empty(1)", f"{empty * 1e6:.2f} us", "", ""))

    size = 2048
    forward, both, _ = bench_flash_seconds(size)
    rng = np.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((1, size, 128)).astype(ml_dtypes.bfloat16) for _ in range(4))
    py_forward = best(lambda: rs.attention(q, k, v, recipe="fa2-bf16"), repeat=3)
    py_both = best(lambda: rs.attention(q, k, v, recipe="fa2-bf16", backward=True, do=do), repeat=3)
    rows.append((f"attention fa2-bf16 N = {size}, D = 128, forward", f"{py_forward:.3f} s",
                 f"{forward:.3f} s (bench_flash)", f"{py_forward / forward:.2f}x"))
    rows.append((f"attention fa2-bf16 N = {size}, D = 128, forward + backward", f"{py_both:.3f} s",
                 f"{both:.3f} s (bench_flash)", f"{py_both / both:.2f}x"))

    rows += torch_rows(x, threads)

    print("| what | Python | baseline | ratio |\n| --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
