#!/usr/bin/env python3
"""Packs one phase of the GPU kit into what may come back from a GPU machine.

The device tool returns at most 8 files of at most 16 MiB. This writes summary.json and at most
7 .tar.xz archives of at most 15 MiB each (60 MiB in all), in order of value: the logs and
metadata first, then each step's outputs by its rank; a step whose archive is too large is
split into as few archives as fit, most valuable files first; what still does not fit is dropped and the drop is
recorded in the summary. Phase H (the one-call Hopper check) comes back as one archive where
everything fits in one, else as the others do. Standard library only (the GPU machine has no
extra packages).

    kit_pack.py --phase A|B|C|H --work DIR --out DIR [--kit KIT] [--dry-run]
"""
import hashlib
import io
import json
import lzma
import pathlib
import sys
import tarfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import KitInputError, Parser, json_lines, run_main, write_whole  # noqa: E402

SCHEMA = 1
MAX_FILES = 8  # summary.json included
MAX_FILE_BYTES = 15 * 1024 * 1024
MAX_PHASE_BYTES = 60 * 1024 * 1024
MAX_PHASE_TIMEOUT_S = 540  # every phase under 9 minutes, the device tool's 10-minute cap aside
# The Hopper check is one call of at most 8 minutes, packing and the tool's start included.
PHASE_TIMEOUT_S = {"H": 480}

# The steps of each phase, most valuable first (docs/gpu.md).
STEP_ORDER = {"A": ["mufu", "probe", "sass"], "B": ["sweep", "gpu-tests", "bench"], "C": ["sdpa", "sanitizers"],
              "H": ["smoke", "sweep", "sweep-ex2", "bench", "goldens", "layout", "sanitizers", "sass"]}
ONE_ARCHIVE = {"H"}  # phases that come back as one archive where it fits
# Within a step packed file by file: what to keep first (the first matching fragment wins).
FILE_ORDER = ["ex2.approx.f32", "lg2.approx.f32", "ex2.approx.ftz", "lg2.approx.ftz", "rcp.approx",
              "mma_", "_fwd", "_bwd"]


def file_rank(path):
    for i, fragment in enumerate(FILE_ORDER):
        if fragment in path.name:
            return i
    return len(FILE_ORDER)


def archive(files, base):
    """The .tar.xz bytes of `files` (paths relative to `base`), deterministic: sorted, no owners, mtime 0."""
    buf = io.BytesIO()
    with lzma.open(buf, "wb", preset=6) as xz, tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(files):
            info = tar.gettarinfo(str(f), arcname=str(f.relative_to(base)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(f, "rb") as data:
                tar.addfile(info, data)
    return buf.getvalue()


def candidates(phase, work):
    """(label, files) in order of value; a step too big for one archive becomes one per file. A
    phase of ONE_ARCHIVE is one ("all", every file) where that fits."""
    if phase in ONE_ARCHIVE:
        files = sorted(p for name in ["logs", "metadata", *STEP_ORDER[phase]] for p in (work / name).rglob("*")
                       if p.is_file())
        blob = archive(files, work)
        if len(blob) <= MAX_FILE_BYTES:
            return [("all", files, blob)]
    out = [("logs", sorted(p for p in (work / "logs").rglob("*") if p.is_file()) +
            sorted(p for p in (work / "metadata").rglob("*") if p.is_file()))]
    for name in STEP_ORDER[phase]:
        files = sorted(p for p in (work / name).rglob("*") if p.is_file())
        if not files:
            continue
        blob = archive(files, work)
        if len(blob) <= MAX_FILE_BYTES:
            out.append((name, files, blob))
        else:
            out += [(f"{name}-{group[0].stem}" + (f"-and-{len(group) - 1}-more" if len(group) > 1 else ""), group)
                    for group in file_groups(files, work)]
    return out


def file_groups(files, work):
    """A step too big for one archive as few archives as fit the file limit, most valuable files
    first: each file compressed alone to size it, then files joined in order while their sizes
    sum within the limit (an archive of several compresses to about the sum or less); a group
    whose archive still does not fit goes back to one file an archive."""
    groups, current, size = [], [], 0
    for f in sorted(files, key=lambda p: (file_rank(p), p.name)):
        alone = len(archive([f], work))
        if current and size + alone > MAX_FILE_BYTES:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += alone
    if current:
        groups.append(current)
    fitted = []
    for group in groups:
        fitted += [group] if len(group) == 1 or len(archive(group, work)) <= MAX_FILE_BYTES else [[f] for f in group]
    return fitted


STEP_FIELDS = {"name": str, "status": str, "timeout_s": int}


def read_steps(work):
    """run_all.sh's steps.jsonl, one step a line: KitInputError naming a line that is not one."""
    path = work / "steps.jsonl"
    if not path.is_file():
        raise KitInputError(f"--work: {work} has no steps.jsonl (run_all.sh writes it)")
    steps = []
    for number, step, _ in json_lines(path.read_text(errors="replace")):
        if not isinstance(step, dict) or not all(type(step.get(k)) is t for k, t in STEP_FIELDS.items()):
            raise KitInputError(f"{path} line {number}: not a step (an object with name, status and timeout_s)")
        steps.append(step)
    return steps


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", choices=("A", "B", "C", "H"), required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--kit", help="the kit, whose manifest's commit the summary records")
    a = p.parse_args(argv)
    work, out = pathlib.Path(a.work), pathlib.Path(a.out)
    if out.resolve() == work.resolve() or work.resolve() in out.resolve().parents:
        raise KitInputError(f"--out: {out} is inside --work {work}, whose files it packs; write elsewhere")
    steps = read_steps(work)
    manifest = {}
    if a.kit:
        try:
            manifest = json.loads(pathlib.Path(a.kit, "manifest.json").read_text())
        except (ValueError, RecursionError):
            manifest = None
        if not isinstance(manifest, dict):
            raise KitInputError(f"--kit: {a.kit}/manifest.json is not a kit's manifest")
    out.mkdir(parents=True, exist_ok=True)

    kept, dropped, total = [], [], 0
    for item in candidates(a.phase, work):
        label, files = item[0], item[1]
        blob = item[2] if len(item) > 2 else archive(files, work)
        name = f"{a.phase}-{label}.tar.xz"
        why = None
        if len(blob) > MAX_FILE_BYTES:
            why = f"{len(blob)} bytes compressed, over the {MAX_FILE_BYTES}-byte file limit"
        elif len(kept) + 1 >= MAX_FILES:
            why = f"already {len(kept)} archives and summary.json: the {MAX_FILES}-file limit"
        elif total + len(blob) > MAX_PHASE_BYTES:
            why = f"would bring the phase to {total + len(blob)} bytes, over {MAX_PHASE_BYTES}"
        if why:
            dropped.append({"archive": name, "files": [str(f.relative_to(work)) for f in files], "why": why})
            continue
        write_whole(out / name, blob)
        total += len(blob)
        kept.append({"archive": name, "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
                     "files": [str(f.relative_to(work)) for f in files]})

    summary = {
        "schema": SCHEMA,
        "phase": a.phase,
        "dry_run": a.dry_run,
        "kit": {"commit": manifest.get("commit"), "bytes": manifest.get("bytes")},
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": steps,
        "timeouts_s": sum(s["timeout_s"] for s in steps),
        "archives": kept,
        "dropped": dropped,
        "budgets": {"max_files": MAX_FILES, "max_file_bytes": MAX_FILE_BYTES, "max_phase_bytes": MAX_PHASE_BYTES,
                    "max_phase_timeout_s": PHASE_TIMEOUT_S.get(a.phase, MAX_PHASE_TIMEOUT_S)},
        "passed": all(s["status"] in ("ok", "skipped") for s in steps),
    }
    # summary.json last: it vouches for the archives written before it.
    write_whole(out / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    print(f"kit_pack.py: phase {a.phase}: {len(kept)} archives, {total} bytes, {len(dropped)} dropped; "
          f"steps: " + ", ".join(f"{s['name']} {s['status']}" for s in steps))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(run_main("kit_pack.py", main))
