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
     BF16 flash and cuDNN forward case is written as a dump and compared with
     `roundscope compare` against the exact truth and the emulations of torch-flash-sm90 (PyTorch's
     flash op order with an H100's MUFU, its split-KV path where PyTorch splits) and fa2-bf16: the
     fractions that match are reported, not required (docs/gpu.md; golden_h100 requires them).
Golden files are regenerable: each phase's archives are copied as they came (compressed
outputs), with golden.json naming the generator, the kit commit and the input hashes.
Exit 0 when every required check passes, 1 when one fails, 2 on bad input.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def phase_a(root, golden, bins, report):
    ok = True
    captures = sorted((root / "mufu").glob("mufu_*.safetensors"))
    if captures:
        r = run([bins / "mufu_fit", *captures, "--models", golden / "mufu-models", "--json", golden / "mufu_fit.json"])
        report["mufu"] = {"captures": len(captures), "exit": r.returncode, "output": r.stdout[-4000:]}
        ok &= r.returncode == 0
    probes = sorted(f for f in (root / "probe").glob("*.safetensors") if f.name != "conversions.safetensors")
    report["mma"] = []
    for f in probes:
        r = run([bins / "roundscope", "mma", f, "--check"])
        report["mma"].append({"file": f.name, "exit": r.returncode, "output": (r.stdout + r.stderr)[-600:]})
        ok &= r.returncode == 0
    conversions = root / "probe" / "conversions.safetensors"
    if conversions.exists():  # the GPU's digests against the emulator's, made again here
        r = run([bins / "roundscope", "check", conversions])
        report["conversions"] = {"exit": r.returncode, "output": (r.stdout + r.stderr)[-600:]}
        ok &= r.returncode == 0
    return ok


def phase_b(root, golden, bins, report):
    lines = []
    sweep = root / "sweep" / "sweep.jsonl"
    if sweep.exists():
        lines = [json.loads(x) for x in sweep.read_text().splitlines() if x.strip()]
    cases = [x for x in lines if x.get("runnable", True)]
    inexact = [x for x in cases if not x["exact"]]
    report["sweep"] = {"cases": len(cases), "not_exact": len(inexact), "not_runnable":
                       [{"preset": x["preset"], "why": x["why"]} for x in lines if not x.get("runnable", True)],
                       "first_not_exact": inexact[:10]}
    bench = root / "bench" / "bench.jsonl"
    report["bench"] = [json.loads(x) for x in bench.read_text().splitlines() if x.strip()] if bench.exists() else []
    return len(cases) > 0 and not inexact


def phase_c(root, golden, bins, report):
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    ok = True
    report["sdpa"] = []
    # Which flash kernel ran each forward case (sdpa_cases.json, names profiled on a shape's first
    # scenario: the kernel depends on the shape alone): the split-KV one, or the one
    # torch-flash-sm90 models. The recipe decides the split from B x H of the dump (batch 0 only
    # here), so a case the GPU ran unsplit is compared with split_kv_sms=0, the unsplit kernel.
    cases_file = root / "sdpa" / "sdpa_cases.json"
    kernels = {}
    if cases_file.exists():
        for c in json.loads(cases_file.read_text()):
            if c.get("pass") == "forward":
                key = (c["shape"], c["backend"], c["dtype"], "causal" if c["causal"] else "full")
                kernels.setdefault(key, [])
                kernels[key] += c.get("kernels", [])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for f in sorted((root / "sdpa").glob("sdpa_*_fwd.safetensors")):
            with safe_open(str(f), "pt") as st:
                meta = st.metadata()
                tensors = {k: st.get_tensor(k) for k in st.keys()}
            b, h, n, d = json.loads(meta["bhnd"])
            hashes = json.loads(meta["input_sha256"])
            shape = meta["shape"]
            for scenario, want in hashes.items():
                path = tmp / f"{shape}_{scenario}.safetensors"
                if not path.exists():
                    r = run([bins / "kit_inputs", "--scenario", scenario, "--heads", b * h, "--n", n, "--d", d,
                             "--seed", 7, "-o", path])
                    if r.returncode != 0:
                        raise RuntimeError(f"kit_inputs: {r.stderr.strip()}")
                got = hashlib.sha256(path.read_bytes()).hexdigest()
                if got != want:
                    report["sdpa"].append({"file": f.name, "scenario": scenario, "error": "inputs differ from the GPU's"})
                    ok = False
                    continue
                with safe_open(str(path), "pt") as st:
                    x = {k: st.get_tensor(k)[:h] for k in ("q", "k", "v")}  # batch 0: its H heads
                for backend in ("flash", "cudnn"):
                    for mask in ("full", "causal"):
                        key = f"{backend}.bf16.{scenario}.{mask}"
                        if key + ".o" not in tensors:
                            continue
                        dump = {k: v.to(torch.bfloat16) for k, v in x.items()}
                        dump["o"] = tensors[key + ".o"].reshape(h, n, d)
                        if key + ".lse" in tensors:
                            dump["lse"] = tensors[key + ".lse"].reshape(h, n)
                        out = tmp / f"{key}.safetensors"
                        save_file(dump, str(out), metadata={"causal": str(mask == "causal").lower(),
                                                            "softmax_scale": meta["softmax_scale"]})
                        entry = {"file": f.name, "case": key}
                        ran = kernels.get((shape, backend, "bf16", mask), [])
                        unsplit = backend == "flash" and any("flash_fwd_kernel<" in k for k in ran) and \
                            not any("splitkv" in k for k in ran)
                        for recipe in ("torch-flash-sm90", "fa2-bf16"):
                            extra = ["--set", "split_kv_sms=0"] if recipe == "torch-flash-sm90" and (unsplit or backend == "cudnn") else []
                            r = run([bins / "roundscope", "compare", out, "--recipe", recipe, "--json", *extra])
                            if r.returncode == 0:
                                j = json.loads(r.stdout)
                                outs = j.get("outputs", {})
                                entry[recipe] = {"matched": j.get("matched"), "total": j.get("total"), "set": extra[1:]}
                                # The kernel's own error against the exact truth (the same for both recipes).
                                entry["truth"] = {name: {"rel_rms": o.get("rel_rms"), "max_abs": o.get("max_abs")}
                                                  for name, o in outs.items()}
                            else:
                                entry[recipe] = {"error": r.stderr.strip()[-400:]}
                                ok = False
                        report["sdpa"].append(entry)
    return ok


# What a GPU machine sends back is data, never a path: the phase is one of the kit's, and each
# archive a plain file name in the phase's folder (no folder, no "..").
ARCHIVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.tar\.xz")


def read_summary(phase_dir):
    """summary.json, checked field by field before anything is built from it: ValueError naming
    the field that is not what the kit writes."""
    summary = json.loads((phase_dir / "summary.json").read_text())
    if not isinstance(summary, dict):
        raise ValueError("not a JSON object")
    if summary.get("phase") not in ("A", "B", "C"):
        raise ValueError(f"phase {summary.get('phase')!r} is not A, B or C")
    archives = summary.get("archives")
    if not isinstance(archives, list):
        raise ValueError("archives is not a list")
    for entry in archives:
        name = entry.get("archive") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not ARCHIVE_NAME.fullmatch(name) or ".." in name:
            raise ValueError(f"archive {name!r} is not a plain .tar.xz file name")
        if not isinstance(entry.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise ValueError(f"archive {name}: sha256 is not 64 hex digits")
    if not isinstance(summary.get("steps", []), list):
        raise ValueError("steps is not a list")
    return summary


def is_input(path, phase_dir, summary):
    """Whether `path` is (or resolves to) summary.json or one of the phase's archives."""
    inputs = [phase_dir / "summary.json", *(phase_dir / e["archive"] for e in summary["archives"])]
    for x in inputs:
        if path.resolve() == x.resolve() or (path.exists() and x.exists() and os.path.samefile(path, x)):
            return True
    return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase_dir")
    p.add_argument("--golden", required=True, help="where the golden files go")
    p.add_argument("--bin", default=None, help="folder with roundscope, mufu_fit and kit_inputs (default: build)")
    p.add_argument("--json", help="write the report here")
    a = p.parse_args(argv)
    phase_dir = pathlib.Path(a.phase_dir)
    repo = pathlib.Path(__file__).resolve().parents[2]
    bins = pathlib.Path(a.bin) if a.bin else None
    try:
        summary = read_summary(phase_dir)
        phase = summary["phase"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ingest.py: {phase_dir / 'summary.json'}: {e}", file=sys.stderr)
        return 2
    if a.json is not None and is_input(pathlib.Path(a.json), phase_dir, summary):
        print(f"ingest.py: --json: {a.json} is one of the phase's own files; write the report elsewhere",
              file=sys.stderr)
        return 2
    if bins is None:
        build = repo / "build"
        bins = pathlib.Path(tempfile.mkdtemp(prefix="roundscope-ingest-bin-"))
        for name, where in (("roundscope", build), ("mufu_fit", build / "tools/gpu"),
                            ("kit_inputs", build / "tools/gpu")):
            (bins / name).symlink_to(where / name)
    golden = pathlib.Path(a.golden) / f"phase-{phase}"
    golden.mkdir(parents=True, exist_ok=True)
    report = {"phase": phase, "dry_run": summary.get("dry_run"), "kit": summary.get("kit"), "archives": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for entry in summary["archives"]:
            path = phase_dir / entry["archive"]
            data = path.read_bytes() if path.exists() else b""
            if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                print(f"ingest.py: {path}: missing or not the archive the summary lists", file=sys.stderr)
                return 2
            with tarfile.open(path, "r:xz") as tar:
                tar.extractall(root, filter="data")
            shutil.copyfile(path, golden / entry["archive"])
            report["archives"].append(entry["archive"])
        check = {"A": phase_a, "B": phase_b, "C": phase_c}[phase]
        passed = check(root, golden, bins, report)
    report["passed"] = bool(passed)
    (golden / "golden.json").write_text(json.dumps({
        "generator": "tools/gpu/run_all.sh " + phase, "kit": summary.get("kit"), "dry_run": summary.get("dry_run"),
        "archives": summary["archives"], "steps": summary.get("steps", [])}, indent=1) + "\n")
    text = json.dumps(report, indent=1)
    if a.json:
        pathlib.Path(a.json).write_text(text + "\n")
    print(f"ingest.py: phase {phase}: {'passed' if passed else 'FAILED'} ({len(report['archives'])} archives)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
