"""`roundscope fit` on the twelve numpy kernels with hidden choices of tests/peer/test_fit_numpy_kernels.py,
against one `roundscope compare` of the same dump in the same run (what one full evaluation with the
truth costs): the search's time, its evaluations, and its cost in compares.

    PYTHONPATH=build/python .venv/bin/python tools/bench/bench_fit.py [BUILD_DIR]

Each kernel: 2 heads of N = 256 keys, D = 16, BF16 inputs; fit with --rows 32 and the default
budget (6000 evaluations), the winner confirmed on every row. Then PyTorch's own CPU attention
(tests/peer/test_aten_cpu_torch.py's dump: 2 heads of 128 queries and 700 keys, D = 80, O and LSE)
fitted from every preset but torch-cpu-bf16, on every row. Prints a table (docs/performance.md);
`bench_fit.py BUILD_DIR torch-cpu` runs the last row alone."""
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

import roundscope as rs

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "peer"))
from numpy_flash import flash_forward  # type: ignore[import-not-found]  # noqa: E402
from test_fit_numpy_kernels import D, H, KERNELS, N, SCALE  # type: ignore[import-not-found]  # noqa: E402

BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build")
# the split kernels' combine takes the H100's ex2 through the tests' C entry point (tests/peer/capi.py)
os.environ.setdefault("ROUNDSCOPE_CAPI", str(BUILD / "tests" / "libroundscope_capi.so"))
from capi import mufu_units  # type: ignore[import-not-found]  # noqa: E402


def timed(args):
    start = time.perf_counter()
    p = subprocess.run([str(BUILD / "roundscope"), *map(str, args)], capture_output=True, text=True, check=True)
    return time.perf_counter() - start, p.stdout


def torch_cpu_row(tmp):
    import torch  # the dump is torch's own CPU attention

    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 128, 80, generator=g).bfloat16()
    k, v = (torch.randn(1, 2, 700, 80, generator=g).bfloat16() for _ in range(2))
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False)[:2]
    path = pathlib.Path(tmp) / "cpu.safetensors"
    rs.write(path, {"q": q, "k": k, "v": v, "o": o, "lse": lse})
    starts = [x for r in rs.recipes()["recipes"] if r["name"] != "torch-cpu-bf16" for x in ("--from", r["name"])]
    fit_s, out = timed(["fit", path, *starts, "--json", "--threads", 1])
    j = json.loads(out)
    sets = [y for key, val in j["best"]["settings"].items() for y in ("--set", f"{key}={val}")]
    compare_s = min(timed(["compare", path, "--recipe", j["best"]["preset"], *sets, "--json", "--threads", 1])[0]
                    for _ in range(3))
    print(f"| PyTorch's CPU attention (torch-cpu-bf16) | {'yes' if j['exact'] else 'no'} | {j['evaluations']} | "
          f"{fit_s:.1f} | {compare_s:.3f} | {fit_s / compare_s:.0f} |")


def main():
    only_torch_cpu = sys.argv[2:] == ["torch-cpu"]
    rng = np.random.default_rng(1)
    x = [(rng.standard_normal((H, N, D)) * s).astype(np.float32) for s in (2, 2, 1)]
    held = [t.astype(ml_dtypes.bfloat16).astype(np.float32) for t in x]
    print(f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores")
    print("| hidden choices | exact | evaluations | fit (s) | one compare (s) | fit / compare |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        units = mufu_units()
        for choices in [] if only_torch_cpu else KERNELS:
            outs = [flash_forward(held[0][h], held[1][h], held[2][h], scale=SCALE, units=units, **choices)
                    for h in range(H)]
            path = pathlib.Path(tmp) / "kernel.safetensors"
            rs.write(path, {"q": x[0], "k": x[1], "v": x[2], "o": np.stack([o for o, _ in outs]),
                            "lse": np.stack([lse for _, lse in outs])}, {"softmax_scale": str(SCALE)})
            fit_s, out = timed(["fit", path, "--rows", 32, "--json", "--threads", 1])
            j = json.loads(out)
            best = j["best"]
            sets = [y for k, v in best["settings"].items() for y in ("--set", f"{k}={v}")]
            flags = ["--recipe", best["preset"], *sets]
            compare_s = min(timed(["compare", path, *flags, "--json", "--threads", 1])[0] for _ in range(3))
            name = ", ".join(f"{k}={v}" for k, v in choices.items())
            print(f"| {name} | {'yes' if j['exact'] else 'no'} | {j['evaluations']} | {fit_s:.1f} | {compare_s:.3f} | "
                  f"{fit_s / compare_s:.0f} |")
        torch_cpu_row(tmp)


if __name__ == "__main__":
    main()
