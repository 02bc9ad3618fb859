#!/usr/bin/env python3
"""Checks what one phase of the GPU kit wrote against the budgets and summary.json's schema.

    kit_check.py PHASE_DIR [--allow-failed-steps]

The folder must hold summary.json and the archives it lists, nothing else: at most 8 files,
none over 15 MiB, 60 MiB in all; every archive's SHA-256 as listed; the steps' timeouts summing
to at most 540 s; every step ok or skipped with a reason (unless --allow-failed-steps).
Prints one line per problem; exit 0 when there is none, 1 otherwise.
"""
import argparse
import hashlib
import json
import pathlib
import sys

STEP_KEYS = {"name": str, "status": str, "rc": int, "timeout_s": int, "seconds": (int, float)}
SUMMARY_KEYS = {"schema": int, "phase": str, "dry_run": bool, "kit": dict, "written": str, "steps": list,
                "timeouts_s": int, "archives": list, "dropped": list, "budgets": dict, "passed": bool}


def problems(phase_dir, allow_failed):
    out = []
    d = pathlib.Path(phase_dir)
    try:
        s = json.loads((d / "summary.json").read_text())
    except (OSError, ValueError) as e:
        return [f"summary.json: unreadable ({e})"]
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(s.get(key), kind):
            out.append(f"summary.json: '{key}' missing or not {kind.__name__}")
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
    if sum(x.get("timeout_s", 0) for x in s["steps"]) > b["max_phase_timeout_s"]:
        out.append(f"the steps' timeouts sum to {s['timeouts_s']} s, over {b['max_phase_timeout_s']}")
    if s["passed"] != all(x.get("status") in ("ok", "skipped") for x in s["steps"]):
        out.append("summary.json: 'passed' disagrees with the steps")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase_dir")
    p.add_argument("--allow-failed-steps", action="store_true")
    a = p.parse_args(argv)
    found = problems(a.phase_dir, a.allow_failed_steps)
    for line in found:
        print(f"kit_check.py: {a.phase_dir}: {line}")
    if not found:
        print(f"kit_check.py: {a.phase_dir}: within every budget")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
