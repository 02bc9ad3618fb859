#!/usr/bin/env python3
"""Checks what one phase of the GPU kit wrote against the budgets and summary.json's schema.

    kit_check.py PHASE_DIR [--allow-failed-steps]

The folder must hold summary.json and the archives it lists, nothing else: at most 8 files,
none over 15 MiB, 60 MiB in all; every archive's SHA-256 as listed; the steps' timeouts summing
to at most 540 s (480 s for phase H, the one-call Hopper check); every step ok or skipped with a
reason (unless --allow-failed-steps).
Prints one line per problem; exit 0 when there is none, 1 otherwise, 2 when PHASE_DIR is not a
folder.
"""
import hashlib
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import KitInputError, Parser, run_main  # noqa: E402

STEP_KEYS = {"name": str, "status": str, "rc": int, "timeout_s": int, "seconds": (int, float)}
PHASE_TIMEOUT_S = {"A": 540, "B": 540, "C": 540, "H": 480}  # the budgets, whatever a summary claims
SUMMARY_KEYS = {"schema": int, "phase": str, "dry_run": bool, "kit": dict, "written": str, "steps": list,
                "timeouts_s": int, "archives": list, "dropped": list, "budgets": dict, "passed": bool}


def problems(phase_dir, allow_failed):
    out = []
    d = pathlib.Path(phase_dir)
    try:
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError, RecursionError) as e:
        return [f"summary.json: unreadable ({e})"]
    if not isinstance(s, dict):
        return ["summary.json: not a JSON object"]
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(s.get(key), kind):
            out.append(f"summary.json: '{key}' missing or not {kind.__name__}")
    for key in ("max_files", "max_file_bytes", "max_phase_bytes", "max_phase_timeout_s"):
        if type(s["budgets"].get(key)) is not int:
            out.append(f"summary.json: budgets '{key}' missing or not int")
    for i, a in enumerate(s["archives"]):
        if not (isinstance(a, dict) and isinstance(a.get("archive"), str) and type(a.get("bytes")) is int
                and isinstance(a.get("sha256"), str)):
            out.append(f"summary.json: archives[{i}] is not an archive, bytes and sha256")
        elif not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.tar\.xz", a["archive"]):
            out.append(f"summary.json: archives[{i}] {a['archive'][:80]!r} is not a plain .tar.xz file name")
    for i, step in enumerate(s["steps"]):
        if not isinstance(step, dict):
            out.append(f"summary.json: steps[{i}] is not an object")
    if out:
        return out
    b = s["budgets"]
    files = [p for p in d.iterdir()]
    if len(files) > b["max_files"]:
        out.append(f"{len(files)} files, over the limit of {b['max_files']}")
    listed = {a["archive"] for a in s["archives"]} | {"summary.json"}
    for p in files:
        if p.name not in listed:
            out.append(f"{p.name}: not listed in summary.json")
        if not p.is_file():
            out.append(f"{p.name}: not a regular file")
        elif p.stat().st_size > b["max_file_bytes"]:
            out.append(f"{p.name}: {p.stat().st_size} bytes, over {b['max_file_bytes']}")
    total = 0
    for a in s["archives"]:
        p = d / a["archive"]
        if not p.is_file():
            out.append(f"{a['archive']}: listed but absent")
            continue
        data = p.read_bytes()
        total += len(data)
        if hashlib.sha256(data).hexdigest() != a["sha256"] or len(data) != a["bytes"]:
            out.append(f"{a['archive']}: size or SHA-256 differs from summary.json")
    if total > b["max_phase_bytes"]:
        out.append(f"archives total {total} bytes, over {b['max_phase_bytes']}")
    for step in s["steps"]:
        for key, kind in STEP_KEYS.items():
            if not isinstance(step.get(key), kind):
                out.append(f"step {step.get('name')}: '{key}' missing or mistyped")
        if step.get("status") not in ("ok", "failed", "timeout", "skipped"):
            out.append(f"step {step.get('name')}: unknown status {step.get('status')!r}")
        if step.get("status") == "skipped" and not step.get("why"):
            out.append(f"step {step.get('name')}: skipped without a reason")
        if step.get("status") in ("failed", "timeout") and not allow_failed:
            out.append(f"step {step.get('name')}: {step['status']} (exit {step.get('rc')})")
    if s["phase"] not in PHASE_TIMEOUT_S:
        out.append(f"summary.json: phase {s['phase'][:40]!r} is not one of {', '.join(PHASE_TIMEOUT_S)}")
    limit = min(b["max_phase_timeout_s"], PHASE_TIMEOUT_S.get(s["phase"], 0))
    if sum(x["timeout_s"] for x in s["steps"] if type(x.get("timeout_s")) is int) > limit:
        out.append(f"the steps' timeouts sum to {s['timeouts_s']} s, over {limit}")
    if s["passed"] != all(x.get("status") in ("ok", "skipped") for x in s["steps"]):
        out.append("summary.json: 'passed' disagrees with the steps")
    return out


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("phase_dir")
    p.add_argument("--allow-failed-steps", action="store_true")
    a = p.parse_args(argv)
    if not pathlib.Path(a.phase_dir).is_dir():
        raise KitInputError(f"{a.phase_dir}: not a folder (a phase's output: summary.json and its archives)")
    found = problems(a.phase_dir, a.allow_failed_steps)
    for line in found:
        print(f"kit_check.py: {a.phase_dir}: {line}")
    if not found:
        print(f"kit_check.py: {a.phase_dir}: within every budget")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(run_main("kit_check.py", main))
