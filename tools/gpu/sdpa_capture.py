#!/usr/bin/env python3
"""Captures of PyTorch's scaled-dot-product-attention backends, for the GPU kit (phase C).

Every backend the device has (flash, efficient, cudnn and math on a GPU; flash and math on the
CPU, the kit's dry run) runs the kit's synthetic inputs (tools/gpu/kit_inputs) in BF16 and FP16,
causal and not, forward and (BF16) backward. For each case it keeps o and lse (and dq, dk, dv),
whether two runs gave the same bits, and, on a GPU, the names of the kernels that ran (split-KV
or not, the cuDNN engine). Only outputs are written: the inputs are made again from their seed
by `ingest.sh`, and each file records the SHA-256 of the inputs it used.

Needs torch and safetensors only (the GPU machine's Python has nothing else).

    sdpa_capture.py --inputs DIR --out DIR [--device cuda|cpu] [--shapes S1,S2,S3]

Shapes (B, H, N, D), after docs/gpu.md: S1 (1, 2, 128, 64) every backend; S3 (14, 1, 1000, 128)
the non-split flash path, batch 0 kept; S2 (1, 1, 1000, 128) flash only, the split-KV path; S4
(1, 2, 256, 64) the backwards past one tile (flash's row and key blocks, cuDNN past 128, the
efficient kernel's key splits); S5 (1, 2, 128, 128) the backwards at D 128 (other engines and
kernels). Where a shape has a flash backward, it runs again under PyTorch's deterministic mode
(`torch.use_deterministic_algorithms(True)`), kept as backend `flash-deterministic`. `--backends`
keeps some of them (forward and backward).
Exit 0 when every case ran or was skipped for a stated reason, 1 when one failed, 2 on bad input.
"""
import hashlib
import json
import math
import pathlib
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import Parser  # noqa: E402

SHAPES = {"S1": (1, 2, 128, 64), "S3": (14, 1, 1000, 128), "S2": (1, 1, 1000, 128), "S4": (1, 2, 256, 64),
          "S5": (1, 2, 128, 128)}
SCENARIOS = ("random", "sink", "repeated-max", "wide")
BACKENDS = ("flash", "efficient", "cudnn", "math")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
# What runs where: S2 is flash's split path only; backward on S1, S4 and S5 (three fused
# backends, BF16 and FP16) and S3 (flash and cuDNN, BF16, random and sink).
FUSED = ("flash", "efficient", "cudnn")
FORWARD_BACKENDS = {"S1": BACKENDS, "S3": BACKENDS, "S2": ("flash",), "S4": BACKENDS, "S5": BACKENDS}
BACKWARD_BACKENDS = {"S1": FUSED, "S3": ("flash", "cudnn"), "S2": (), "S4": FUSED, "S5": FUSED}
BACKWARD_SCENARIOS = {"S1": SCENARIOS, "S3": ("random", "sink"), "S2": (), "S4": SCENARIOS, "S5": SCENARIOS}
CAPTURED = BACKENDS + ("flash-deterministic",)  # what --backends may name
BACKWARD_DTYPES = {"S1": ("bf16", "f16"), "S3": ("bf16",), "S2": (), "S4": ("bf16", "f16"), "S5": ("bf16", "f16")}


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def load_inputs(path, shape, device):
    from safetensors.torch import load_file

    t = load_file(str(path))
    b, h, n, d = shape
    out = {}
    for name in ("q", "k", "v", "do"):
        if name not in t or tuple(t[name].shape) != (b * h, n, d):
            raise ValueError(f"{path}: {name} must be float32 [{b * h}, {n}, {d}]")
        out[name] = t[name].reshape(b, h, n, d).to(device)
    return out


def sdpa_backend(name):
    from torch.nn.attention import SDPBackend

    return {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }[name]


def forward(backend, q, k, v, causal, scale):
    """o and lse (lse None where the backend's op has none) through the backend's own aten op."""
    aten = torch.ops.aten
    n = q.shape[2]
    if backend == "math":
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(sdpa_backend("math")):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), None
    if q.device.type == "cpu":
        if backend != "flash":
            raise NotImplementedError(f"no {backend} backend on the CPU")
        o, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)[:2]
    elif backend == "flash":
        o, lse = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)[:2]
    elif backend == "efficient":
        o, lse = aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal, scale=scale)[:2]
    else:
        o, lse = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False, scale=scale)[:2]
    return o, lse[..., :n].float()  # the efficient kernel pads lse to a multiple of 32


def backward(backend, q, k, v, do, causal, scale):
    """dq, dk, dv of the backend; `flash-deterministic` is flash under PyTorch's deterministic mode
    (restored afterwards). Not warn_only: with it, PyTorch only warns and runs the default,
    non-deterministic flash backward (seen on the H200, 2026-12-04)."""
    from torch.nn.attention import sdpa_kernel

    deterministic = backend == "flash-deterministic"
    was = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    try:
        if deterministic:
            torch.use_deterministic_algorithms(True)
        with sdpa_kernel(sdpa_backend("flash" if deterministic else backend)):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        o.backward(do)
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])
    return q.grad, k.grad, v.grad


def same_bits(a, b):
    if a is None or b is None:
        return a is None and b is None
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def kernel_names(fn, device):
    """The device kernels one call launches (torch.profiler), or [] on the CPU."""
    if device != "cuda":
        return []
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.name not in names:
            names.append(e.name)
    return names


def record(case, body):
    """Runs body() for one case, recording its status (ok, skipped with the reason, or the error)
    and time: a backend that refuses a case does not stop the others."""
    start = time.perf_counter()
    try:
        body()
        case["status"] = "ok"
    except NotImplementedError as e:
        case["status"], case["why"] = "skipped", str(e)
    except Exception as e:
        case["status"], case["why"] = "error", f"{type(e).__name__}: {e}"
    case["seconds"] = round(time.perf_counter() - start, 4)
    return case


def capture_shape(shape_name, inputs_dir, device, out_dir, wanted=CAPTURED):
    """Writes sdpa_<shape>_<dtype>_<fwd|bwd>.safetensors; returns the case records."""
    shape = SHAPES[shape_name]
    keep = slice(0, 1)  # batch 0: S3's other 13 batches only make the launch realistic
    scale = 1.0 / math.sqrt(shape[3])
    cases, tensors, hashes = [], {}, {}
    for scenario in SCENARIOS:
        path = pathlib.Path(inputs_dir) / f"{shape_name}_{scenario}.safetensors"
        hashes[scenario] = sha256(path)
        raw = load_inputs(path, shape, device)
        for dtype_name, dtype in DTYPES.items():
            x = {k: t.to(dtype) for k, t in raw.items()}  # round to nearest even, as the emulator rounds
            for causal in (False, True):
                mask = "causal" if causal else "full"
                for backend in (b for b in FORWARD_BACKENDS[shape_name] if b in wanted):
                    key = f"{backend}.{dtype_name}.{scenario}.{mask}"
                    case = {"shape": shape_name, "backend": backend, "dtype": dtype_name, "scenario": scenario,
                            "causal": causal, "pass": "forward"}

                    def run_forward(case=case, key=key, backend=backend, x=x, causal=causal):
                        o, lse = forward(backend, x["q"], x["k"], x["v"], causal, scale)
                        o2, lse2 = forward(backend, x["q"], x["k"], x["v"], causal, scale)
                        case["deterministic"] = same_bits(o, o2) and same_bits(lse, lse2)
                        group = tensors.setdefault((dtype_name, "fwd"), {})
                        group[key + ".o"] = o[keep].contiguous().cpu()
                        if lse is not None:
                            group[key + ".lse"] = lse[keep].contiguous().cpu()
                        if scenario == SCENARIOS[0]:
                            case["kernels"] = kernel_names(
                                lambda: forward(backend, x["q"], x["k"], x["v"], causal, scale), device)

                    cases.append(record(case, run_forward))
                if dtype_name not in BACKWARD_DTYPES[shape_name] or scenario not in BACKWARD_SCENARIOS[shape_name]:
                    continue
                backends = BACKWARD_BACKENDS[shape_name]
                for backend in backends + (("flash-deterministic",) if "flash" in backends else ()):
                    if backend not in wanted:
                        continue
                    key = f"{backend}.{dtype_name}.{scenario}.{mask}"
                    case = {"shape": shape_name, "backend": backend, "dtype": dtype_name, "scenario": scenario,
                            "causal": causal, "pass": "backward"}

                    def run_backward(case=case, key=key, backend=backend, x=x, causal=causal):
                        if device == "cpu" and not backend.startswith("flash"):
                            raise NotImplementedError(f"no {backend} backend on the CPU")
                        with warnings.catch_warnings(record=True) as said:
                            warnings.simplefilter("always")
                            grads = backward(backend, x["q"], x["k"], x["v"], x["do"], causal, scale)
                        if said:  # e.g. that the kernel has no deterministic mode
                            case["warnings"] = sorted({str(w.message)[:300] for w in said})
                        again = backward(backend, x["q"], x["k"], x["v"], x["do"], causal, scale)
                        case["deterministic"] = all(same_bits(a, b) for a, b in zip(grads, again))
                        group = tensors.setdefault((dtype_name, "bwd"), {})
                        for name, g in zip(("dq", "dk", "dv"), grads):
                            group[f"{key}.{name}"] = g[keep].contiguous().cpu()
                        if scenario == SCENARIOS[0]:
                            case["kernels"] = kernel_names(
                                lambda: backward(backend, x["q"], x["k"], x["v"], x["do"], causal, scale), device)

                    cases.append(record(case, run_backward))
    metadata = {
        "generator": "tools/gpu/sdpa_capture.py",
        "shape": shape_name,
        "bhnd": json.dumps(shape),
        "kept_batches": "1",
        "softmax_scale": repr(scale),
        "input_sha256": json.dumps(hashes),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cudnn": str(torch.backends.cudnn.version() if device == "cuda" else None),
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
    }
    for (dtype_name, direction), group in sorted(tensors.items()):
        meta = dict(metadata, cases=json.dumps([c for c in cases if c["dtype"] == dtype_name and
                                                 c["pass"] == ("forward" if direction == "fwd" else "backward")]))
        save_file(group, str(pathlib.Path(out_dir) / f"sdpa_{shape_name}_{dtype_name}_{direction}.safetensors"),
                  metadata=meta)
    return cases


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--inputs", required=True, help="folder of kit_inputs files: <shape>_<scenario>.safetensors")
    p.add_argument("--out", required=True)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--shapes", default="S1,S3,S2")
    p.add_argument("--backends", default=",".join(CAPTURED),
                   help="which backends to run (flash-deterministic: flash's backward in deterministic mode)")
    a = p.parse_args(argv)
    shapes = a.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            p.error(f"--shapes: unknown shape '{s}' (expected {', '.join(SHAPES)})")
    wanted = tuple(a.backends.split(","))
    for b in wanted:
        if b not in CAPTURED:
            p.error(f"--backends: unknown backend '{b}' (expected {', '.join(BACKENDS)} or flash-deterministic)")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("sdpa_capture: no CUDA device", file=sys.stderr)
        return 3
    pathlib.Path(a.out).mkdir(parents=True, exist_ok=True)
    cases = []
    try:
        for s in shapes:
            cases += capture_shape(s, a.inputs, a.device, a.out, wanted)
    except (OSError, ValueError) as e:
        print(f"sdpa_capture: {e}", file=sys.stderr)
        return 2
    (pathlib.Path(a.out) / "sdpa_cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    failed = [c for c in cases if c["status"] == "error"]
    ran = sum(c["status"] == "ok" for c in cases)
    print(f"sdpa_capture: {ran} cases ran, {len(cases) - ran - len(failed)} skipped, {len(failed)} failed")
    for c in failed:
        print(f"  {c['shape']} {c['backend']} {c['dtype']} {c['scenario']} causal={c['causal']} {c['pass']}: "
              f"{c['why']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
