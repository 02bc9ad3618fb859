"""The GPU kit's scripts on hostile input, with the command line's contract: one line on standard
error, exit 2, nothing written. What a GPU machine sends back (summary.json's phase and archive
names) is data, never a path; no script writes over its own input."""
import hashlib
import json
import subprocess
import sys

import pytest

from conftest import ROOT


def ingest(*args):
    return subprocess.run([sys.executable, ROOT / "tools/gpu/ingest.py", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def phase_folder(tmp_path, **summary):
    folder = tmp_path / "phase"
    folder.mkdir()
    archive = folder / "probe.tar.xz"
    archive.write_bytes(b"not really an archive")
    entry = {"archive": "probe.tar.xz", "sha256": hashlib.sha256(archive.read_bytes()).hexdigest()}
    (folder / "summary.json").write_text(json.dumps({"phase": "B", "archives": [entry], "steps": [], **summary}))
    return folder


def everything_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("summary, named", [
    ({"phase": "x/../../../escaped"}, "phase"),
    ({"archives": [{"archive": "../../evil.tar.xz", "sha256": "0" * 64}]}, "archive"),
    ({"archives": [{"archive": "/etc/evil.tar.xz", "sha256": "0" * 64}]}, "archive"),
    ({"archives": [{"archive": "ok.tar.xz", "sha256": "not hex"}]}, "sha256"),
    ({"archives": "everything"}, "archives"),
])
def test_ingest_takes_no_path_from_what_a_gpu_sent(tmp_path, summary, named):
    folder = phase_folder(tmp_path, **summary)
    before = everything_under(tmp_path)
    p = ingest(folder, "--golden", tmp_path / "golden")
    assert p.returncode == 2 and named in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert everything_under(tmp_path) == before, "nothing written"


def test_ingest_refuses_to_write_its_report_over_its_input(tmp_path):
    folder = phase_folder(tmp_path)
    summary = (folder / "summary.json").read_bytes()
    for target in (folder / "summary.json", folder / "." / "probe.tar.xz"):
        p = ingest(folder, "--golden", tmp_path / "golden", "--json", target)
        assert p.returncode == 2 and "--json" in p.stderr, p.stderr
    assert (folder / "summary.json").read_bytes() == summary
    assert not (tmp_path / "golden").exists()


def script(name, *args, cwd=None):
    return subprocess.run([sys.executable, ROOT / "tools/gpu" / name, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_trim_probe_refuses_to_write_over_its_capture_and_a_keep_below_one(tmp_path):
    capture = tmp_path / "mma_x.safetensors"
    capture.write_bytes(b"a capture")
    for args in ((capture, "--out", tmp_path), ("mma_x.safetensors", "--out", ".")):
        p = script("trim_probe.py", *args, cwd=tmp_path)
        assert p.returncode == 2 and "--out" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    p = script("trim_probe.py", capture, "--out", tmp_path / "out", "--keep", "-1")
    assert p.returncode == 2 and "--keep" in p.stderr, p.stderr
    assert capture.read_bytes() == b"a capture" and not (tmp_path / "out").exists()


def test_bench_sdpa_refuses_to_write_over_its_input_and_says_a_failed_write(tmp_path):
    import torch
    from safetensors.torch import save_file

    inputs = tmp_path / "inputs.safetensors"
    save_file({n: torch.randn(2, 16, 8) for n in ("q", "k", "v")}, inputs)
    before = inputs.read_bytes()
    p = script("bench_sdpa.py", "--device", "cpu", "--inputs", inputs, "--out", inputs, "--repeats", "1")
    assert p.returncode == 2 and "--out" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert inputs.read_bytes() == before
    p = script("bench_sdpa.py", "--device", "cpu", "--inputs", inputs, "--out", "/dev/full", "--repeats", "1")
    assert p.returncode == 2 and "/dev/full" in p.stderr, p.stderr
    p = script("bench_sdpa.py", "--device", "cpu", "--inputs", inputs, "--out", tmp_path / "lines.jsonl", "--repeats", "1")
    assert p.returncode == 0 and (tmp_path / "lines.jsonl").read_text().count("\n") >= 1, p.stderr
