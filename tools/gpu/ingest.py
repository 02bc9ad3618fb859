#!/usr/bin/env python3
"""Turns what one phase of the GPU kit brought back into golden files, and runs their checks.

    ingest.py PHASE_DIR --golden DIR [--bin DIR] [--json FILE]

PHASE_DIR holds summary.json and the phase's .tar.xz archives (tools/gpu/run_all.sh). Every
archive is checked against the summary's SHA-256, then:
  A  the MUFU captures go through mufu_fit (a model fitted and checked on all 2^32 inputs; its
     table written beside them), and each MMA probe file through `roundscope mma --check`;
  B  the crosscheck sweep is counted: every case must be bit-exact; the benchmark's lines (our
     kernels' TFLOP/s and their ratios to PyTorch's backends) go into the report;
  C  the SDPA captures' inputs are made again by kit_inputs and must hash as on the GPU; each
     flash, cuDNN, efficient and math forward case (BF16 and FP16), and each BF16 backward case (flash,
     cuDNN, efficient: dq, dk and dv beside the o and lse of its forward capture), is written as a
     dump and compared with `roundscope compare` against the exact truth and the emulations of
     torch-flash-sm90 (PyTorch's flash op order with an H100's MUFU, its split-KV path where
     PyTorch splits, its backward), torch-cudnn-sm90 (cuDNN's forward and backward), torch-efficient-sm90
     (the memory-efficient kernel's forward and backward) and fa2-bf16, or for the math path torch-math-sm90 alone
     (float32 between its GEMMs, no fused kernel's recipe is near it): the fractions that match are reported, not
     required (docs/gpu.md; golden_h100 requires them);
  H  (the one-call Hopper check) both crosscheck sweeps of h100-bf16 (as the recipe is, and with
     exp2=ex2.approx.ftz) are counted as in B, and every raw answer of the Hopper kernel (the
     goldens: q, k, v as it read them, its o and lse) is compared by `roundscope compare` with
     the emulator under the preset and settings it ran: every bit must match; the benchmark, the
     SASS estimate and the wgmma lint go into the report, and each h100-bf16 kernel's estimate
     beside its measured speed, the estimate scaled by the tensor cores' measured rate (the
     benchmark's "torch matmul") over the quoted one.
Golden files are regenerable: each phase's archives are copied as they came (compressed
outputs), with golden.json naming the generator, the kit commit and the input hashes.
Exit 0 when every required check passes, 1 when one fails, 2 on bad input.
"""
import hashlib
import json
import lzma
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import Parser, is_same_file, json_lines, write_whole  # noqa: E402
from sass_estimate import CLOCK_HZ, SMS, TENSOR_MACS_PER_CYCLE  # noqa: E402

# What a GPU machine sends back is data, never a path: the phase is one of the kit's, each archive
# a plain file name in the phase's folder, and every name inside the archives' files (a shape, a
# scenario) a plain name before anything is built from it.
ARCHIVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.tar\.xz")
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_CAPTURE_VALUES = 1 << 24  # the kit's largest shape, S3, is 14 x 1000 x 128 = 1,792,000


class KitDataError(ValueError):
    """What the GPU sent back is not what the kit writes: the message names the file and field."""


def plain_name(x, where):
    if not isinstance(x, str) or not PLAIN_NAME.fullmatch(x):
        raise KitDataError(f"{where}: {str(x)[:80]!r} is not a plain name (letters, digits, '_', '-')")
    return x


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def json_objects(path):
    """A .jsonl file's objects, one a line; KitDataError naming the line that is not one."""
    out = []
    for number, x, why in json_lines(path.read_text(errors="replace")):
        if why is not None:
            raise KitDataError(f"{path.name} line {number}: not JSON ({why})")
        if not isinstance(x, dict):
            raise KitDataError(f"{path.name} line {number}: not a JSON object")
        out.append(x)
    return out


def phase_a(root, golden, bins, report):
    ok = True
    captures = sorted((root / "mufu").glob("mufu_*.safetensors"))
    if captures:
        r = run([bins["mufu_fit"], *captures, "--models", golden / "mufu-models", "--json", golden / "mufu_fit.json"])
        report["mufu"] = {"captures": len(captures), "exit": r.returncode, "output": r.stdout[-4000:]}
        ok &= r.returncode == 0
    probes = sorted(f for f in (root / "probe").glob("*.safetensors") if f.name != "conversions.safetensors")
    report["mma"] = []
    for f in probes:
        r = run([bins["roundscope"], "mma", f, "--check"])
        report["mma"].append({"file": f.name, "exit": r.returncode, "output": (r.stdout + r.stderr)[-600:]})
        ok &= r.returncode == 0
    conversions = root / "probe" / "conversions.safetensors"
    if conversions.exists():  # the GPU's digests against the emulator's, made again here
        r = run([bins["roundscope"], "check", conversions])
        report["conversions"] = {"exit": r.returncode, "output": (r.stdout + r.stderr)[-600:]}
        ok &= r.returncode == 0
    return ok


def sweep_report(sweep):
    """A crosscheck sweep's .jsonl counted: ({cases, not_exact, not_runnable, first_not_exact},
    whether it ran and was bit-exact in every case)."""
    lines = json_objects(sweep) if sweep.exists() else []
    for i, x in enumerate(lines):
        runnable = x.get("runnable", True)
        if not isinstance(runnable, bool) or (runnable and not isinstance(x.get("exact"), bool)):
            raise KitDataError(f"sweep.jsonl line {i + 1}: 'runnable' and 'exact' are not true or false")
    cases = [x for x in lines if x.get("runnable", True)]
    inexact = [x for x in cases if not x["exact"]]
    counted = {"cases": len(cases), "not_exact": len(inexact), "not_runnable":
               [{"preset": x.get("preset"), "why": x.get("why")} for x in lines if not x.get("runnable", True)],
               "first_not_exact": inexact[:10]}
    return counted, len(cases) > 0 and not inexact


def phase_b(root, golden, bins, report):
    report["sweep"], ok = sweep_report(root / "sweep" / "sweep.jsonl")
    bench = root / "bench" / "bench.jsonl"
    report["bench"] = json_objects(bench) if bench.exists() else []
    return ok


SETTING = re.compile(r"[a-z0-9_]{1,40}=[A-Za-z0-9._+-]{1,40}")


def kernel_dump_check(roundscope, f, name=None):
    """One raw answer of a kernel (gpu/kernel_dump.hpp) against the emulator of the preset and
    settings it ran under, on the architecture it ran on: its report entry, `exact` when every
    bit of o and lse matches. What the metadata names is checked before it is used."""
    meta = header_metadata(f)
    if not isinstance(meta, dict):
        raise KitDataError(f"{f.name}: its metadata is not a JSON object")
    preset = plain_name(meta.get("roundscope.preset"), f"{f.name}: metadata 'roundscope.preset'")
    arch = plain_name(meta.get("roundscope.arch"), f"{f.name}: metadata 'roundscope.arch'")
    settings = meta.get("roundscope.settings", "")
    if not isinstance(settings, str):
        raise KitDataError(f"{f.name}: metadata 'roundscope.settings' is not a string")
    settings = [x for x in settings.split(",") if x]
    for x in settings:
        if not SETTING.fullmatch(x):
            raise KitDataError(f"{f.name}: metadata 'roundscope.settings' holds {x[:60]!r}, not KEY=VALUE")
    extra = [y for x in [f"arch={arch}", *settings] for y in ("--set", x)]
    r = run([roundscope, "compare", f, "--recipe", preset, "--json", *extra])
    entry = {"file": name or f.name, "preset": preset, "settings": settings, "arch": arch,
             "device": str(meta.get("roundscope.device", ""))[:80]}
    if r.returncode != 0:
        return {**entry, "exact": False, "error": (r.stderr or r.stdout).strip()[-400:]}
    j = json.loads(r.stdout)
    outputs = j.get("outputs", {})
    entry["outputs"] = {name: {"matched": o.get("matched"), "total": o.get("total")} for name, o in outputs.items()}
    entry["exact"] = {"o", "lse"} <= outputs.keys() and all(
        type(o.get("total")) is int and o["total"] > 0 and o.get("matched") == o["total"] for o in outputs.values())
    return entry


QUOTED_TENSOR_TFLOPS = 2 * TENSOR_MACS_PER_CYCLE * SMS * CLOCK_HZ / 1e12  # 989.4, sass_estimate's peak
# sass_estimate's kernel names -> the benchmark's: h100-bf16 (exp2_arg fma, p_scale 1) with its
# software exp2 (Exp2Kind 0) and with --set exp2=ex2.approx.ftz (3)
HOPPER_KERNEL = re.compile(r"forward_kernelILi(\d+)ELNS_3emu8Exp2KindE([03])ELNS3_7Exp2ArgE1ELb0E")
BENCH_NAME = {"0": "roundscope hopper h100-bf16", "3": "roundscope hopper h100-bf16 exp2=ex2.approx.ftz"}


def _rate(x):
    return x if type(x) in (int, float) and math.isfinite(x) and x > 0 else None


def estimate_beside_bench(estimates, bench):
    """For each h100-bf16 kernel the SASS estimate covers: its launch estimate at the quoted peak,
    that estimate at the tensor rate the device sustained (the "torch matmul" line), and the
    speed measured on the same shape (None where a figure is missing or not a number)."""
    gemm = next((x for x in bench if x.get("kernel") == "torch matmul"), {})
    tensor = _rate(gemm.get("tflops"))
    out = []
    for e in estimates:
        m = HOPPER_KERNEL.search(e.get("kernel")) if isinstance(e.get("kernel"), str) else None
        launch = e.get("launch")
        if not m or not isinstance(launch, dict) or not isinstance(launch.get("tflops"), dict):
            continue
        d, name, shape = int(m.group(1)), BENCH_NAME[m.group(2)], launch.get("shape")
        at_peak = _rate(launch["tflops"].get("stated"))
        measured = next((_rate(x.get("tflops")) for x in bench if x.get("kernel") == name and x.get("d") == d
                         and shape == [1, x.get("heads"), x.get("n")]), None)
        out.append({"kernel": name, "d": d, "shape": shape, "estimate_at_quoted_peak": at_peak,
                    "tensor_tflops_measured": tensor,
                    "estimate_at_measured_tensor_rate": at_peak * tensor / QUOTED_TENSOR_TFLOPS
                    if at_peak and tensor else None, "measured": measured})
    return out


def phase_h(root, golden, bins, report):
    report["sweep"], ok = sweep_report(root / "sweep" / "sweep.jsonl")
    report["sweep-ex2"], ok_ex2 = sweep_report(root / "sweep-ex2" / "sweep.jsonl")
    dumps = sorted((root / "goldens").rglob("*.safetensors"))
    report["goldens"] = [kernel_dump_check(bins["roundscope"], f, str(f.relative_to(root / "goldens")))
                         for f in dumps]
    bench = root / "bench" / "bench.jsonl"
    report["bench"] = json_objects(bench) if bench.exists() else []
    estimate = root / "sass" / "estimate.jsonl"
    report["sass_estimate"] = json_objects(estimate) if estimate.exists() else []
    report["estimate_beside_bench"] = estimate_beside_bench(report["sass_estimate"], report["bench"])
    return ok and ok_ex2 and len(dumps) > 0 and all(e["exact"] for e in report["goldens"])


def flash_kernels(cases_file):
    """(shape, backend, dtype, mask) -> the kernel names that ran its forward pass, from
    sdpa_cases.json (names profiled on a shape's first scenario: the kernel depends on the shape)."""
    kernels = {}
    if not cases_file.exists():
        return kernels
    try:
        cases = json.loads(cases_file.read_text(errors="replace"))
    except (ValueError, RecursionError) as e:
        raise KitDataError(f"sdpa_cases.json: not JSON ({e})") from None
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise KitDataError("sdpa_cases.json: not a list of cases")
    for i, c in enumerate(cases):
        if c.get("pass") != "forward":
            continue
        names = c.get("kernels", [])
        if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
            raise KitDataError(f"sdpa_cases.json case {i}: kernels is not a list of names")
        key = (c.get("shape"), c.get("backend"), c.get("dtype"), "causal" if c.get("causal") is True else "full")
        kernels.setdefault(key, [])
        kernels[key] += names
    return kernels


def capture_metadata(f, meta):
    """(B, H, N, D, {scenario: input sha256}, shape, softmax scale) of an SDPA capture, each field
    checked: KitDataError naming the capture and the field."""
    def field(key):
        if not isinstance(meta, dict) or not isinstance(meta.get(key), str):
            raise KitDataError(f"{f.name}: metadata {key!r} is missing")
        return meta[key]
    try:
        bhnd, hashes = json.loads(field("bhnd")), json.loads(field("input_sha256"))
    except (ValueError, RecursionError) as e:
        raise KitDataError(f"{f.name}: metadata is not JSON where it should be ({e})") from None
    if not isinstance(bhnd, list) or len(bhnd) != 4 or not all(
            type(x) is int and 1 <= x <= 2**16 for x in bhnd):
        raise KitDataError(f"{f.name}: metadata 'bhnd' is not four sizes from 1 to 65536")
    if math.prod(bhnd) > MAX_CAPTURE_VALUES:  # kit_inputs would be asked to make them
        raise KitDataError(f"{f.name}: metadata 'bhnd' {bhnd} is {math.prod(bhnd)} values a tensor, more than the "
                           f"kit captures ({MAX_CAPTURE_VALUES})")
    if not isinstance(hashes, dict) or not all(isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v)
                                               for v in hashes.values()):
        raise KitDataError(f"{f.name}: metadata 'input_sha256' is not scenario names with 64 hex digits")
    for scenario in hashes:
        plain_name(scenario, f"{f.name}: a scenario")
    scale = field("softmax_scale")
    try:
        float(scale)
    except ValueError:
        raise KitDataError(f"{f.name}: metadata 'softmax_scale' {scale[:40]!r} is not a number") from None
    return (*bhnd, hashes, plain_name(field("shape"), f"{f.name}: metadata 'shape'"), scale)


def header_metadata(f):
    """A safetensors file's __metadata__, read from its header alone (no tensor, no torch):
    KitDataError where the header is not one."""
    data = f.read_bytes()
    size = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    try:
        if not 0 < size <= len(data) - 8:
            raise ValueError("its header's length does not fit the file")
        header = json.loads(data[8:8 + size])
    except (ValueError, RecursionError) as e:
        raise KitDataError(f"{f.name}: not a capture the kit writes ({e})") from None
    if not isinstance(header, dict):
        raise KitDataError(f"{f.name}: not a capture the kit writes (its header is not a JSON object)")
    return header.get("__metadata__", {})


def kernel_output(f, tensors, name, shape):
    """A captured output reshaped to the dump's shape; KitDataError where it has other sizes."""
    if name not in tensors:
        raise KitDataError(f"{f.name}: {name} is missing")
    x = tensors[name]
    if x.numel() != math.prod(shape):
        raise KitDataError(f"{f.name}: {name} has {x.numel()} values, not {' x '.join(map(str, shape))}")
    return x.reshape(shape)


def compare_dump(bins, out, recipe, extra):
    """`roundscope compare` of one dump: {matched, total, set, notes} and each output's error
    against the exact truth, or {error}."""
    r = run([bins["roundscope"], "compare", out, "--recipe", recipe, "--json", *extra])
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}, None
    j = json.loads(r.stdout)
    outs = j.get("outputs", {})
    got = {"matched": j.get("matched"), "total": j.get("total"), "set": extra[1::2], "notes": j.get("notes", []),
           "outputs": {name: {"matched": o.get("matched"), "total": o.get("total")} for name, o in outs.items()}}
    truth = {name: {"rel_rms": o.get("rel_rms"), "max_abs": o.get("max_abs")} for name, o in outs.items()}
    return got, truth


# What a recipe is set to for each captured dtype: FP16 inputs, P and O (the presets are BF16's),
# and the FlashAttention-2 preset of that dtype.
DTYPE_SETS = {"bf16": [], "f16": ["input=f16", "p_format=f16", "o_format=f16"]}
FA2_PRESET = {"bf16": "fa2-bf16", "f16": "fa2-f16"}
# A backward's products and gradients in the dtype too (dS and P for dV, dQ, dK, dV): FP16
# backwards captured on the H200, 2026-12-04.
BACKWARD_DTYPE_SETS = {"bf16": [], "f16": ["ds_format=f16", "grad_format=f16"]}
# The math path keeps P in float32 whatever the inputs' dtype.
MATH_DTYPE_SETS = {"bf16": [], "f16": ["input=f16", "o_format=f16"]}


def sdpa_case(bins, tmp, dumps, shape, key, mask, scale, x, kernels, forward, backward=None):
    """One case (BACKEND.DTYPE.SCENARIO.MASK, DTYPE bf16 or f16) written as a dump, its forward
    capture's o and lse (and with `backward`, do and the backward capture's dq, dk, dv), and
    compared: its report entry. `forward`, `backward`: (capture file, its tensors)."""
    import torch
    from safetensors.torch import save_file

    (f, tensors), (h, n, d) = forward, x["q"].shape
    backend, dtype = key.split(".")[:2]
    dump = {k: v.to(torch.float16 if dtype == "f16" else torch.bfloat16) for k, v in x.items()
            if k != "do" or backward}
    dump["o"] = kernel_output(f, tensors, key + ".o", (h, n, d))
    if key + ".lse" in tensors:
        dump["lse"] = kernel_output(f, tensors, key + ".lse", (h, n))
    if backward:
        for g in ("dq", "dk", "dv"):
            dump[g] = kernel_output(backward[0], backward[1], f"{key}.{g}", (h, n, d))
    name = f"{key}.grad" if backward else key
    out = tmp / f"{name}.safetensors"
    save_file(dump, str(out), metadata={"causal": str(mask == "causal").lower(), "softmax_scale": scale})
    if dumps is not None:  # kept for the caller: a kernel's dump to fit or compare
        shutil.copyfile(out, dumps / f"{shape}.{name}.safetensors")
    entry = {"file": (backward or forward)[0].name, "case": key, "dtype": dtype,
             "pass": "backward" if backward else "forward"}
    ran = kernels.get((shape, backend, dtype, mask), [])
    unsplit = backend == "flash" and any("flash_fwd_kernel<" in k for k in ran) and not any("splitkv" in k for k in ran)
    # torch-cudnn-sm90 models cuDNN's forward, and its backward at D 64; torch-efficient-sm90 the
    # memory-efficient kernel's forward and backward (neither splits KV)
    # (each compare computes the exact truth: the backward recipes run on their own captures)
    recipes = ("torch-flash-sm90", "fa2-bf16") if backward else ("torch-flash-sm90", "torch-cudnn-sm90", "fa2-bf16")
    if backward and backend == "cudnn":
        recipes += ("torch-cudnn-sm90",)
    if backend == "efficient":
        recipes += ("torch-efficient-sm90",)
    if backend == "math":  # float32 between its GEMMs: no fused kernel's recipe is near it
        recipes = ("torch-math-sm90",)
    for recipe in recipes:
        unsplit_model = recipe == "torch-flash-sm90" and (unsplit or backend != "flash")
        dtype_sets = MATH_DTYPE_SETS[dtype] if recipe == "torch-math-sm90" else DTYPE_SETS[dtype]
        if backward:
            dtype_sets = dtype_sets + BACKWARD_DTYPE_SETS[dtype]
        sets = (["split_kv_sms=0"] if unsplit_model else []) + (dtype_sets if recipe.startswith("torch") else [])
        extra = [x for s in sets for x in ("--set", s)]
        preset = FA2_PRESET[dtype] if recipe == "fa2-bf16" else recipe
        entry[preset], truth = compare_dump(bins, out, preset, extra)
        if truth is not None:  # the kernel's own error against the exact truth (the same for both recipes)
            entry["truth"] = truth
    return entry


# Captured backends no recipe models: each such case is listed in the report with the reason.
UNMODELLED_BACKENDS = {"flash-deterministic": "flash's backward under torch.use_deterministic_algorithms(True): "
                                              "no recipe models that mode's dQ order yet"}


def phase_c(root, golden, bins, report, dumps=None, cases=None):
    """Every capture's cases compared (report["sdpa"]); `cases`, a compiled pattern, keeps those
    whose SHAPE.BACKEND.DTYPE.SCENARIO.MASK (with .grad for a backward) it finds."""
    from safetensors import SafetensorError, safe_open

    ok = True
    report["sdpa"] = []
    report["sdpa_not_compared"] = []  # captures no recipe models, named rather than passed over
    # Which flash kernel ran each forward case: the split-KV one, or the one torch-flash-sm90
    # models. The recipe decides the split from B x H of the dump (batch 0 only here), so a case
    # the GPU ran unsplit is compared with split_kv_sms=0, the unsplit kernel.
    kernels = flash_kernels(root / "sdpa" / "sdpa_cases.json")
    captures = sorted((root / "sdpa").glob("sdpa_*_fwd.safetensors"))
    # Every capture's metadata checked before torch is imported (seconds) and anything is run.
    described = [(f, capture_metadata(f, header_metadata(f))) for f in captures]
    # A backward capture (dq, dk, dv) is compared beside its shape's forward capture of the same
    # dtype, whose o and lse the backward pass started from (the same kernel, deterministic).
    backward = {}
    for f in sorted((root / "sdpa").glob("sdpa_*_bwd.safetensors")):
        forward_file = f.with_name(f.name[:-len("_bwd.safetensors")] + "_fwd.safetensors")
        if forward_file in captures:
            backward[forward_file] = (f, capture_metadata(f, header_metadata(f)))

    def load(f):
        try:
            with safe_open(str(f), "pt") as st:
                return {k: st.get_tensor(k) for k in st.keys()}
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise KitDataError(f"{f.name}: not a capture the kit writes ({e})") from None

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for f, (b, h, n, d, hashes, shape, scale) in described:
            dtype = f.name[len(f"sdpa_{shape}_"):-len("_fwd.safetensors")]
            if not f.name.startswith(f"sdpa_{shape}_") or dtype not in DTYPE_SETS:
                raise KitDataError(f"{f.name}: not sdpa_{shape}_DTYPE_fwd.safetensors with DTYPE one of "
                                   f"{', '.join(DTYPE_SETS)}")
            tensors = load(f)
            grads_file = backward.get(f)
            grads = load(grads_file[0]) if grads_file else {}
            for name in sorted(grads):  # a case's gradients come together, or the case is not the kit's
                case, g = name.rsplit(".", 1) if "." in name else (name, "")
                lacking = [x for x in ("dq", "dk", "dv") if g in ("dq", "dk", "dv") and f"{case}.{x}" not in grads]
                if lacking:
                    raise KitDataError(f"{grads_file[0].name}: {name} without {case}.{lacking[0]}")
            for name in sorted(grads):
                case = name.rsplit(".", 1)[0]
                if name.endswith(".dq") and case.split(".")[0] in UNMODELLED_BACKENDS and (
                        cases is None or cases.search(f"{shape}.{case}.grad")):
                    report["sdpa_not_compared"].append({"file": grads_file[0].name, "case": case,
                                                        "why": UNMODELLED_BACKENDS[case.split(".")[0]]})
            if grads_file and grads_file[1] != (b, h, n, d, hashes, shape, scale):
                raise KitDataError(f"{grads_file[0].name}: its metadata differs from {f.name}'s")
            for scenario, want in hashes.items():
                path = tmp / f"{shape}_{scenario}.safetensors"
                if not path.exists():
                    r = run([bins["kit_inputs"], "--scenario", scenario, "--heads", b * h, "--n", n, "--d", d,
                             "--seed", 7, "-o", path])
                    if r.returncode != 0:
                        raise KitDataError(f"{f.name}: kit_inputs cannot make its inputs: {r.stderr.strip()[-300:]}")
                got = hashlib.sha256(path.read_bytes()).hexdigest()
                if got != want:
                    report["sdpa"].append({"file": f.name, "scenario": scenario,
                                           "error": "inputs differ from the GPU's"})
                    ok = False
                    continue
                with safe_open(str(path), "pt") as st:
                    x = {k: st.get_tensor(k)[:h] for k in ("q", "k", "v", "do")}  # batch 0: its H heads
                for backend in ("flash", "cudnn", "efficient", "math"):
                    for mask in ("full", "causal"):
                        key = f"{backend}.{dtype}.{scenario}.{mask}"
                        if key + ".o" not in tensors:
                            continue
                        for with_grads in (False, True):
                            if with_grads and key + ".dq" not in grads:
                                continue
                            if cases is not None and not cases.search(f"{shape}.{key}" + (".grad" * with_grads)):
                                continue
                            entry = sdpa_case(bins, tmp, dumps, shape, key, mask, scale, x, kernels, (f, tensors),
                                              (grads_file[0], grads) if with_grads else None)
                            ok &= not any(isinstance(v, dict) and "error" in v for v in entry.values())
                            report["sdpa"].append(entry)
    return ok


def read_summary(phase_dir):
    """summary.json, checked field by field before anything is built from it: KitDataError naming
    the field that is not what the kit writes."""
    try:
        summary = json.loads((phase_dir / "summary.json").read_text(errors="replace"))
    except (ValueError, RecursionError) as e:
        raise KitDataError(f"not JSON ({e})") from None
    if not isinstance(summary, dict):
        raise KitDataError("not a JSON object")
    if summary.get("phase") not in ("A", "B", "C", "H"):
        raise KitDataError(f"phase {str(summary.get('phase'))[:40]!r} is not A, B, C or H")
    archives = summary.get("archives")
    if not isinstance(archives, list):
        raise KitDataError("archives is not a list")
    for entry in archives:
        name = entry.get("archive") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not ARCHIVE_NAME.fullmatch(name) or ".." in name:
            raise KitDataError(f"archive {str(name)[:80]!r} is not a plain .tar.xz file name")
        if not isinstance(entry.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise KitDataError(f"archive {name}: sha256 is not 64 hex digits")
    if len({e["archive"] for e in archives}) != len(archives):
        raise KitDataError("archives lists one archive twice")
    if not isinstance(summary.get("steps", []), list):
        raise KitDataError("steps is not a list")
    return summary


def is_input(path, phase_dir, summary):
    """Whether `path` is (or resolves to) summary.json or one of the phase's archives."""
    return any(is_same_file(path, x) for x in
               [phase_dir / "summary.json", *(phase_dir / e["archive"] for e in summary["archives"])])


def unpack(phase_dir, summary, root):
    """Every archive of the summary checked against its SHA-256 and unpacked under root, before
    anything is written: KitDataError naming the archive that is missing, other or not one. The
    tarfile 'data' filter refuses a member outside root, a link out of it and a device."""
    for entry in summary["archives"]:
        path = phase_dir / entry["archive"]
        data = path.read_bytes() if path.is_file() else b""
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise KitDataError(f"{path}: missing or not the archive the summary lists")
        try:
            with tarfile.open(path, "r:xz") as tar:
                tar.extractall(root, filter="data")
        except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as e:
            raise KitDataError(f"{path}: not an archive the kit writes ({e})") from None


# The programs each phase runs, and where they are built.
NEEDS = {"A": ("roundscope", "mufu_fit"), "B": (), "C": ("roundscope", "kit_inputs"), "H": ("roundscope",)}
BUILT_IN = {"roundscope": ".", "mufu_fit": "tools/gpu", "kit_inputs": "tools/gpu"}


def programs(bin_dir, phase):
    """{name: path} of the programs the phase runs: all in --bin, or each where build/ has it;
    KitDataError naming one that is not there."""
    if bin_dir and not pathlib.Path(bin_dir).is_dir():
        raise KitDataError(f"--bin: {bin_dir} is not a folder")
    build = pathlib.Path(__file__).resolve().parents[2] / "build"
    paths = {name: pathlib.Path(bin_dir) / name if bin_dir else build / BUILT_IN[name] / name for name in NEEDS[phase]}
    for name, path in paths.items():
        if not os.access(path, os.X_OK):
            raise KitDataError(f"--bin: no program {path} (phase {phase} runs it)")
    return paths


def publish(staging, target):
    """staging renamed to target whole: an earlier ingest's folder there is replaced, not mixed."""
    old = None
    if target.exists() or target.is_symlink():
        old = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old)


def refuse(message):
    print(f"ingest.py: {' '.join(str(message).split())[:600]}", file=sys.stderr)
    return 2


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("phase_dir")
    p.add_argument("--golden", required=True, help="where the golden files go")
    p.add_argument("--bin", default=None, help="folder with roundscope, mufu_fit and kit_inputs (default: build)")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--cases", help="phase C: compare only the cases this regular expression finds in "
                                   "SHAPE.BACKEND.DTYPE.SCENARIO.MASK (.grad added for a backward)")
    p.add_argument("--dumps", help="phase C: also keep each compared dump (q, k, v and the kernel's o and lse) "
                                   "in this folder, as SHAPE.BACKEND.DTYPE.SCENARIO.MASK.safetensors")
    a = p.parse_args(argv)
    if a.cases == "":
        return refuse("--cases: an empty pattern keeps every case; leave the option out instead")
    try:
        cases = re.compile(a.cases) if a.cases is not None else None
    except re.error as e:
        return refuse(f"--cases: {a.cases[:80]!r} is not a regular expression ({e})")
    phase_dir = pathlib.Path(a.phase_dir)
    try:
        summary = read_summary(phase_dir)
    except (OSError, KitDataError) as e:
        return refuse(f"{phase_dir / 'summary.json'}: {e}")
    phase = summary["phase"]
    if a.json is not None and is_input(pathlib.Path(a.json), phase_dir, summary):
        return refuse(f"--json: {a.json} is one of the phase's own files; write the report elsewhere")
    golden_root = pathlib.Path(a.golden)
    if golden_root.exists() and not golden_root.is_dir():
        return refuse(f"--golden: {golden_root} is not a folder")
    report = {"phase": phase, "dry_run": summary.get("dry_run"), "kit": summary.get("kit"), "archives": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        try:
            bins = programs(a.bin, phase)
            unpack(phase_dir, summary, root)
        except KitDataError as e:
            return refuse(e)
        # The phase's golden files are made in a folder of their own and renamed into place
        # whole: a refusal half-way (a capture that is not one) leaves nothing behind.
        created = not golden_root.exists()
        golden_root.mkdir(parents=True, exist_ok=True)
        staging = pathlib.Path(tempfile.mkdtemp(prefix=f".phase-{phase}-", dir=golden_root))
        try:
            for entry in summary["archives"]:
                shutil.copyfile(phase_dir / entry["archive"], staging / entry["archive"])
                report["archives"].append(entry["archive"])
            if phase == "C":
                dumps = pathlib.Path(a.dumps) if a.dumps is not None else None
                if dumps is not None:
                    dumps.mkdir(parents=True, exist_ok=True)
                passed = phase_c(root, staging, bins, report, dumps, cases)
            else:
                passed = {"A": phase_a, "B": phase_b, "C": phase_c, "H": phase_h}[phase](root, staging, bins, report)
            report["passed"] = bool(passed)
            (staging / "golden.json").write_text(json.dumps({
                "generator": "tools/gpu/run_all.sh " + phase, "kit": summary.get("kit"),
                "dry_run": summary.get("dry_run"), "archives": summary["archives"],
                "steps": summary.get("steps", [])}, indent=1) + "\n")
            if a.json:
                write_whole(a.json, (json.dumps(report, indent=1) + "\n").encode())
            publish(staging, golden_root / f"phase-{phase}")
        except BaseException as e:
            shutil.rmtree(staging, ignore_errors=True)
            if created:
                shutil.rmtree(golden_root, ignore_errors=True)
            if isinstance(e, (KitDataError, OSError)):
                return refuse(e)
            raise
    if report.get("sdpa_not_compared"):
        print(f"ingest.py: {len(report['sdpa_not_compared'])} captured cases not compared (no recipe models them: "
              f"the report's sdpa_not_compared)")
    print(f"ingest.py: phase {phase}: {'passed' if passed else 'FAILED'} ({len(report['archives'])} archives)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
