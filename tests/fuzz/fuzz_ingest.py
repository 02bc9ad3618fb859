"""Fuzzes the GPU kit's ingest (tools/gpu/ingest.py) with what a GPU machine might send back: an
input is one JSON document, {"summary": summary.json, "archives": {archive name: {member name:
content}}}, mutated field by field from phases the kit writes (tests/fuzz/seeds/ingest). A member's
content is text, {"base64": bytes}, {"symlink": target}, {"hardlink": target} or {"dir": true}; an
archive's sha256 of "=" in the summary is the archive's own (so that mutants reach past the hash).

    PYTHONPATH=build/python .venv/bin/python tests/fuzz/fuzz_ingest.py [libFuzzer options] CORPUS SEEDS

ingest runs the programs of build/ (roundscope, mufu_fit, kit_inputs) as it does after a GPU run.
A finding is any of:
  - ingest raises, or returns anything but 0, 1 (a phase that failed) or 2 (a refusal);
  - anything is written, removed or changed outside --golden and --json, the phase's own files
    included, or a temporary file is left behind;
  - a refusal leaves a golden folder or a report, or says more than one line;
  - a phase that ran leaves no golden.json or no report.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import io
import json
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile

import atheris

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(ROOT / "tools" / "gpu"))
from json_mutator import custom_mutator  # noqa: E402

with atheris.instrument_imports(include=["ingest", "kit_files"]):
    import ingest

WORK = pathlib.Path(tempfile.mkdtemp(prefix="roundscope-fuzz-ingest-"))
atexit.register(shutil.rmtree, WORK, True)
BUILT = {"roundscope": ROOT / "build" / "roundscope", "mufu_fit": ROOT / "build" / "tools" / "gpu" / "mufu_fit",
         "kit_inputs": ROOT / "build" / "tools" / "gpu" / "kit_inputs"}
SAFE_NAME = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def member_info(name, content):
    """(TarInfo, bytes or None) of one member as the document describes it, or None."""
    info = tarfile.TarInfo(name)
    if isinstance(content, str):
        data = content.encode("utf-8", "surrogatepass")
    elif isinstance(content, dict) and isinstance(content.get("base64"), str):
        try:
            data = base64.b64decode(content["base64"], validate=True)
        except ValueError:
            return None
    elif isinstance(content, dict) and isinstance(content.get("symlink"), str):
        info.type, info.linkname = tarfile.SYMTYPE, content["symlink"]
        return info, None
    elif isinstance(content, dict) and isinstance(content.get("hardlink"), str):
        info.type, info.linkname = tarfile.LNKTYPE, content["hardlink"]
        return info, None
    elif isinstance(content, dict) and content.get("dir") is True:
        info.type = tarfile.DIRTYPE
        return info, None
    else:
        return None
    info.size = len(data)
    return info, data


def archive_bytes(members) -> bytes | None:
    if not isinstance(members, dict):
        return None
    buf = io.BytesIO()
    try:
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            for name, content in members.items():
                made = member_info(name, content)
                if made is not None:
                    tar.addfile(made[0], None if made[1] is None else io.BytesIO(made[1]))
    except (ValueError, UnicodeError, tarfile.TarError):  # a name tar cannot hold
        return None
    return buf.getvalue()


def write_phase(doc, phase_dir: pathlib.Path) -> bool:
    """The document as a phase folder (summary.json and its archives); False where it is not one.
    An archive whose name is not a plain file name is not written: the summary may still name it."""
    if not isinstance(doc, dict) or "summary" not in doc:
        return False
    phase_dir.mkdir()
    hashes = {}
    archives = doc.get("archives")
    for name, members in archives.items() if isinstance(archives, dict) else ():
        if not name or name in (".", "..", "summary.json") or not set(name) <= SAFE_NAME or len(name) > 200:
            continue
        data = archive_bytes(members)
        if data is not None:
            (phase_dir / name).write_bytes(data)
            hashes[name] = hashlib.sha256(data).hexdigest()
    summary = doc["summary"]
    if isinstance(summary, dict) and isinstance(summary.get("archives"), list):
        for entry in summary["archives"]:
            if isinstance(entry, dict) and entry.get("sha256") == "=" and isinstance(entry.get("archive"), str):
                entry["sha256"] = hashes.get(entry["archive"], "0" * 64)
    text = summary if isinstance(summary, str) else json.dumps(summary, allow_nan=True)
    (phase_dir / "summary.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    return True


def tree(folder: pathlib.Path) -> dict:
    """{relative path: what it is} of everything under folder, links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = pathlib.Path(dirpath) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                out[rel] = "link " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[rel] = "folder"
    return out


def test_one_input(data: bytes) -> int | None:
    """ingest's exit status on the input, None where it is not a phase."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    for child in WORK.iterdir():
        if child.name != "bin":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    tmp = WORK / "tmp"
    tmp.mkdir()
    phase_dir = WORK / "phase"
    try:
        if not write_phase(doc, phase_dir):
            return None
    except RecursionError:
        return None
    before = tree(WORK)
    golden, report = WORK / "golden", WORK / "report.json"
    err = io.StringIO()
    tempfile.tempdir = str(tmp)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = ingest.main([str(phase_dir), "--golden", str(golden), "--bin", str(WORK / "bin"), "--json",
                              str(report)])
    finally:
        tempfile.tempdir = None
    if rc not in (0, 1, 2):
        raise AssertionError(f"ingest returned {rc!r}")
    after = tree(WORK)
    outside = {p for p in before.keys() | after.keys()
               if before.get(p) != after.get(p) and not (p == "golden" or p.startswith("golden/")
                                                         or p == "report.json")}
    if outside:
        raise AssertionError(f"ingest changed what it does not own: {sorted(outside)[:5]}")
    if rc == 2:
        if golden.exists() or report.exists():
            raise AssertionError("a refusal left a golden folder or a report")
        if err.getvalue().count("\n") != 1:
            raise AssertionError(f"a refusal in more than one line: {err.getvalue()[:300]!r}")
    else:
        phases = [p for p in golden.iterdir()] if golden.is_dir() else []
        if len(phases) != 1 or not (phases[0] / "golden.json").is_file() or not report.is_file():
            raise AssertionError(f"a phase that ran left {sorted(after)[:8]} (exit {rc})")
    return rc


def main():
    (WORK / "bin").mkdir()
    for name, path in BUILT.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"fuzz_ingest: no {path}: build roundscope first")
        (WORK / "bin" / name).symlink_to(path)
    seeds = pathlib.Path(__file__).parent / "seeds" / "ingest"
    for path in sorted(seeds.glob("*.json")):
        if test_one_input(path.read_bytes()) not in (0, 1):
            sys.exit(f"{path} does not ingest: the seeds are out of date")
    seed = json.loads((seeds / "phase_c.json").read_text())
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator(seed))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
