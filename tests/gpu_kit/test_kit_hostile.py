"""The GPU kit's scripts on hostile input, with the command line's contract: one line on standard
error, exit 2, nothing written. What a GPU machine sends back (summary.json's phase and archive
names) is data, never a path; no script writes over its own input."""
import hashlib
import json
import os
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
    p = script("bench_sdpa.py", "--device", "cpu", "--inputs", inputs, "--out", tmp_path / "lines.jsonl",
               "--repeats", "1")
    assert p.returncode == 0 and (tmp_path / "lines.jsonl").read_text().count("\n") >= 1, p.stderr


# -- every kit script, table by table: one line on standard error, the exit the script's
# docstring gives, no traceback, nothing written ----------------------------------------------

def snapshot(path):
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(path.rglob("*"))}


def refused(p, code=2, named=None):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    if named:
        assert named in p.stderr, p.stderr


def tar_xz(members):
    """.tar.xz bytes of members: {name: bytes}, or {name: ("symlink", target)}."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, data[1]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def ingest_phase(tmp_path, phase, members, archive_bytes=None):
    """A phase folder with one archive of `members` (or of archive_bytes as they are), its summary
    true to it."""
    folder = tmp_path / "phase"
    folder.mkdir()
    data = tar_xz(members) if archive_bytes is None else archive_bytes
    (folder / f"{phase}-data.tar.xz").write_bytes(data)
    entry = {"archive": f"{phase}-data.tar.xz", "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "summary.json").write_text(json.dumps({"phase": phase, "archives": [entry], "steps": []}))
    return folder


def fake_bins(tmp_path):
    """Programs that do nothing: a refusal must come before any is needed."""
    bins = tmp_path / "bin"
    bins.mkdir()
    for name in ("roundscope", "mufu_fit", "kit_inputs"):
        (bins / name).write_text("#!/bin/sh\nexit 0\n")
        (bins / name).chmod(0o755)
    return bins


def capture(metadata, tensors=None):
    """An SDPA capture (safetensors bytes) with this metadata."""

    import torch
    from safetensors.torch import save

    return save(tensors or {"flash.bf16.s.full.o": torch.zeros(1, 4, 2)}, metadata=metadata)


GOLDEN_META = {"roundscope.preset": "h100-bf16", "roundscope.arch": "sm90", "roundscope.settings": ""}
GOOD_META = {"bhnd": "[1, 1, 4, 2]", "input_sha256": json.dumps({"s": "0" * 64}), "shape": "S1",
             "softmax_scale": "0.5"}
INGEST_CASES = {
    "archive not xz": ("B", None, b"\xfd7zXZ\x00 not really", "not an archive"),
    "member above the root": ("B", {"../../escaped.txt": b"x"}, None, "not an archive"),
    "link out of the root": ("B", {"sweep/sweep.jsonl": ("symlink", "/etc/passwd")}, None, "not an archive"),
    "sweep line not JSON": ("B", {"sweep/sweep.jsonl": b'{"exact": true}\n{nope\n'}, None, "line 2"),
    "sweep line a list": ("B", {"sweep/sweep.jsonl": b"[1, 2]\n"}, None, "line 1"),
    "sweep without exact": ("B", {"sweep/sweep.jsonl": b'{"preset": "x"}\n'}, None, "exact"),
    "sweep exact a string": ("B", {"sweep/sweep.jsonl": b'{"exact": "yes"}\n'}, None, "exact"),
    "sweep runnable a number": ("B", {"sweep/sweep.jsonl": b'{"runnable": 0, "exact": true}\n'}, None, "runnable"),
    "sweep nested too deep": ("B", {"sweep/sweep.jsonl": b"[" * 100000 + b"\n"}, None, "line 1"),
    "bench line not JSON": ("B", {"sweep/sweep.jsonl": b'{"exact": true}\n', "bench/bench.jsonl": b"nan nan\n"},
                            None, "bench.jsonl"),
    "cases not JSON": ("C", {"sdpa/sdpa_cases.json": b"{"}, None, "sdpa_cases.json"),
    "cases not a list": ("C", {"sdpa/sdpa_cases.json": b"{}"}, None, "sdpa_cases.json"),
    "cases kernels not names": ("C", {"sdpa/sdpa_cases.json": b'[{"pass": "forward", "kernels": [1]}]'}, None,
                                "kernels"),
    "capture not safetensors": ("C", {"sdpa/sdpa_S1_fwd.safetensors": b"\x08" + b"\x00" * 7 + b"garbage!"}, None,
                                "sdpa_S1_fwd.safetensors"),
    "capture without metadata": ("C", "capture", {}, "bhnd"),
    "shape a path": ("C", "capture", {**GOOD_META, "shape": "../../escaped"}, "shape"),
    "shape empty": ("C", "capture", {**GOOD_META, "shape": ""}, "shape"),
    "scenario a path": ("C", "capture", {**GOOD_META, "input_sha256": json.dumps({"../../x": "0" * 64})},
                        "scenario"),
    "scenario hash short": ("C", "capture", {**GOOD_META, "input_sha256": json.dumps({"s": "0"})}, "input_sha256"),
    "hashes a list": ("C", "capture", {**GOOD_META, "input_sha256": "[]"}, "input_sha256"),
    "bhnd three sizes": ("C", "capture", {**GOOD_META, "bhnd": "[1, 1, 4]"}, "bhnd"),
    "bhnd a zero": ("C", "capture", {**GOOD_META, "bhnd": "[1, 0, 4, 2]"}, "bhnd"),
    "bhnd huge": ("C", "capture", {**GOOD_META, "bhnd": "[1, 1, 4, 1000000000]"}, "bhnd"),
    "bhnd too many values": ("C", "capture", {**GOOD_META, "bhnd": "[64, 64, 65536, 128]"}, "more than the kit"),
    "bhnd a float": ("C", "capture", {**GOOD_META, "bhnd": "[1, 1, 4, 2.0]"}, "bhnd"),
    "bhnd not JSON": ("C", "capture", {**GOOD_META, "bhnd": "four"}, "JSON"),
    "scale not a number": ("C", "capture", {**GOOD_META, "softmax_scale": "half"}, "softmax_scale"),
    # the Hopper check's raw answers: what the metadata names is run as a command's arguments
    "golden preset a path": ("H", "golden", {**GOLDEN_META, "roundscope.preset": "../x"}, "roundscope.preset"),
    "golden preset an option": ("H", "golden", {**GOLDEN_META, "roundscope.preset": "--out"}, "roundscope.preset"),
    "golden without a preset": ("H", "golden", {"roundscope.arch": "sm90"}, "roundscope.preset"),
    "golden arch empty": ("H", "golden", {**GOLDEN_META, "roundscope.arch": ""}, "roundscope.arch"),
    "golden setting an option": ("H", "golden", {**GOLDEN_META, "roundscope.settings": "--json=x"},
                                 "roundscope.settings"),
    "golden setting without a value": ("H", "golden", {**GOLDEN_META, "roundscope.settings": "exp2"},
                                       "roundscope.settings"),
    "golden not safetensors": ("H", {"goldens/default/x.safetensors": b"\x08" + b"\x00" * 7 + b"garbage!"}, None,
                               "x.safetensors"),
    "hopper sweep not JSON": ("H", {"sweep-ex2/sweep.jsonl": b"{nope\n"}, None, "line 1"),
}


@pytest.mark.parametrize("case", INGEST_CASES)
def test_ingest_refuses_what_the_gpu_sent_when_it_is_not_what_the_kit_writes(tmp_path, case):
    """Inside the archives too, what a GPU machine sent is data: a member outside the folder,
    a link out of it, a line that is not JSON, a capture whose names would be paths: one line,
    exit 2, no golden folder, nothing written anywhere."""
    phase, members, extra, named = INGEST_CASES[case]
    if members in ("capture", "golden"):
        where = "sdpa/sdpa_S1_fwd.safetensors" if members == "capture" else "goldens/default/x.safetensors"
        members = {where: capture(extra)}
        extra = None
    folder = ingest_phase(tmp_path, phase, members or {}, archive_bytes=extra)
    bins = fake_bins(tmp_path)
    before = snapshot(tmp_path)
    p = ingest(folder, "--golden", tmp_path / "golden", "--bin", bins, "--json", tmp_path / "report.json")
    refused(p, named=named)
    assert snapshot(tmp_path) == before, "nothing written"


def test_ingest_unpacks_a_member_at_an_absolute_path_inside_its_folder(tmp_path):
    """tarfile's 'data' filter takes the leading '/' off: the member lands in the unpacking folder."""
    outside = tmp_path / "escaped.txt"
    folder = ingest_phase(tmp_path, "B", {str(outside): b"x", "sweep/sweep.jsonl": b'{"exact": true}\n'})
    p = ingest(folder, "--golden", tmp_path / "golden", "--bin", fake_bins(tmp_path))
    assert p.returncode == 0, p.stderr
    assert not outside.exists()


@pytest.mark.parametrize("args, named", [
    (["{phase}", "--golden", "{tmp}/golden", "--bin", "{tmp}/nowhere"], "--bin"),
    (["{tmp}/no-such-phase", "--golden", "{tmp}/golden"], "summary.json"),
    (["{phase}", "--golden", "{phase}/summary.json"], "--golden"),
    (["{phase}", "--golden", "{tmp}/golden", "--json", "{phase}/B-data.tar.xz"], "--json"),
    (["{phase}", "--golden", "{tmp}/golden", "--unknown"], "unrecognized"),
    (["{phase}"], "--golden"),
    ([], "required"),
])
def test_ingest_refuses_bad_options_in_one_line(tmp_path, args, named):
    folder = ingest_phase(tmp_path, "B", {"sweep/sweep.jsonl": b'{"exact": true}\n'})
    before = snapshot(tmp_path)
    p = ingest(*[a.format(phase=folder, tmp=tmp_path) for a in args])
    refused(p, named=named)
    assert snapshot(tmp_path) == before


def test_ingest_replaces_a_phase_folder_whole(tmp_path):
    """Ingesting again replaces the phase's golden folder, never mixes two ingests' files."""
    folder = ingest_phase(tmp_path, "B", {"sweep/sweep.jsonl": b'{"exact": true}\n'})
    golden = tmp_path / "golden"
    (golden / "phase-B").mkdir(parents=True)
    (golden / "phase-B" / "stale.txt").write_text("an earlier ingest's")
    p = ingest(folder, "--golden", golden, "--bin", fake_bins(tmp_path))
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in (golden / "phase-B").iterdir()) == ["B-data.tar.xz", "golden.json"]
    assert sorted(x.name for x in golden.iterdir()) == ["phase-B"]


def steps_line(**step):
    return json.dumps({"name": "sweep", "status": "ok", "timeout_s": 10, "rc": 0, "seconds": 1.0, **step})


KIT_PACK_CASES = {
    "no steps.jsonl": (None, [], "steps.jsonl"),
    "steps not JSON": ("{nope\n", [], "line 1"),
    "step a list": ("[1]\n", [], "line 1"),
    "step without timeout": ('{"name": "x", "status": "ok"}\n', [], "line 1"),
    "step timeout a string": (steps_line(timeout_s="10") + "\n", [], "line 1"),
    "step status a number": (steps_line(status=0) + "\n", [], "line 1"),
    "out is work": (steps_line() + "\n", ["--out", "{work}"], "--out"),
    "out inside work": (steps_line() + "\n", ["--out", "{work}/sweep"], "--out"),
    "kit without manifest": (steps_line() + "\n", ["--kit", "{tmp}/nokit"], "manifest.json"),
    "manifest a list": (steps_line() + "\n", ["--kit", "{tmp}/listkit"], "--kit"),
    "phase unknown": (steps_line() + "\n", ["--phase", "Z"], "--phase"),
    "unknown option": (steps_line() + "\n", ["--zip"], "unrecognized"),
}


@pytest.mark.parametrize("case", KIT_PACK_CASES)
def test_kit_pack_refuses_a_work_folder_it_cannot_pack(tmp_path, case):
    steps, extra, named = KIT_PACK_CASES[case]
    work = tmp_path / "work"
    (work / "sweep").mkdir(parents=True)
    (work / "sweep" / "sweep.jsonl").write_text('{"exact": true}\n')
    if steps is not None:
        (work / "steps.jsonl").write_text(steps)
    (tmp_path / "listkit").mkdir()
    (tmp_path / "listkit" / "manifest.json").write_text("[]")
    before = snapshot(tmp_path)
    args = ["--phase", "B", "--work", work, "--out", tmp_path / "out"]
    p = script("kit_pack.py", *args, *[a.format(work=work, tmp=tmp_path) for a in extra])
    refused(p, named=named)
    assert snapshot(tmp_path) == before


def kit_check_folder(tmp_path, summary):
    folder = tmp_path / "phase"
    folder.mkdir()
    if summary is not None:
        (folder / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return folder


GOOD_SUMMARY = {"schema": 1, "phase": "B", "dry_run": True, "kit": {}, "written": "now", "steps": [],
                "timeouts_s": 0, "archives": [], "dropped": [], "passed": True,
                "budgets": {"max_files": 8, "max_file_bytes": 1, "max_phase_bytes": 1, "max_phase_timeout_s": 1}}


@pytest.mark.parametrize("summary, named", [
    (None, "unreadable"),
    ("{", "unreadable"),
    ("[" * 100000, "unreadable"),
    ("[]", "not a JSON object"),
    ({**GOOD_SUMMARY, "archives": ["x"]}, "archives[0]"),
    ({**GOOD_SUMMARY, "archives": [{"archive": "../x.tar.xz", "bytes": 1, "sha256": "0"}]}, "plain"),
    ({**GOOD_SUMMARY, "archives": [{"archive": 7, "bytes": 1, "sha256": "0"}]}, "archives[0]"),
    ({**GOOD_SUMMARY, "steps": ["x"]}, "steps[0]"),
    ({**GOOD_SUMMARY, "steps": [{"name": "x", "status": "ok", "rc": 0, "timeout_s": "9", "seconds": 1}]},
     "timeout_s"),
    ({**GOOD_SUMMARY, "budgets": {"max_files": "8"}}, "budgets"),
    ({**GOOD_SUMMARY, "passed": "yes"}, "passed"),
])
def test_kit_check_reports_a_summary_it_cannot_trust_as_problems(tmp_path, summary, named):
    """kit_check's verdict on a phase folder: problems, one line each, exit 1; never a traceback."""
    folder = kit_check_folder(tmp_path, summary)
    p = script("kit_check.py", folder)
    assert p.returncode == 1 and "Traceback" not in p.stderr and named in p.stdout, (p.stdout, p.stderr)


@pytest.mark.parametrize("args, named", [
    (["{tmp}/nowhere"], "not a folder"),
    (["{tmp}/file.txt"], "not a folder"),
    ([], "phase_dir"),
    (["{tmp}", "--strict"], "unrecognized"),
])
def test_kit_check_refuses_what_is_not_a_phase_folder(tmp_path, args, named):
    (tmp_path / "file.txt").write_text("x")
    refused(script("kit_check.py", *[a.format(tmp=tmp_path) for a in args]), named=named)


@pytest.mark.parametrize("args, named", [
    ([], "give a binary or --sass"),
    (["x.o", "--sass", "{tmp}/code.sass"], "give a binary or --sass"),
    (["--sass", "{tmp}/code.sass", "--warps", "3"], "--warps"),
    (["--sass", "{tmp}/code.sass", "--warps", "x"], "--warps"),
    (["--sass", "{tmp}/code.sass", "--kernel", "("], "--kernel"),
    (["--sass", "{tmp}/nowhere.sass"], "nowhere.sass"),
    (["--sass", "{tmp}/code.sass", "--resources", "{tmp}/nowhere.res"], "nowhere.res"),
    (["--sass", "{tmp}/empty.sass"], "no SASS function"),
    (["--sass", "{tmp}/code.sass"], "no SASS function"),
    (["{tmp}/not-a-binary.o", "--cuobjdump", "{tmp}/no-cuobjdump"], "no-cuobjdump"),
])
def test_sass_estimate_refuses_what_it_cannot_estimate(tmp_path, args, named):
    (tmp_path / "code.sass").write_text("garbage, not cuobjdump's output\n\x00\xff")
    (tmp_path / "empty.sass").write_text("")
    (tmp_path / "not-a-binary.o").write_bytes(b"\x7fELF nope")
    refused(script("sass_estimate.py", *[a.format(tmp=tmp_path) for a in args]), named=named)


@pytest.mark.parametrize("args, named", [
    ([], "give a binary or --sass"),
    (["x.o", "--sass", "{tmp}/code.sass"], "give a binary or --sass"),
    (["--sass", "{tmp}/code.sass", "--kernel", "("], "--kernel"),
    (["--sass", "{tmp}/nowhere.sass"], "nowhere.sass"),
    (["--sass", "{tmp}/code.sass"], "no function matches"),
    (["--sass", "{tmp}/code.sass", "--warps", "8"], "unrecognized"),
    (["{tmp}/not-a-binary.o", "--cuobjdump", "{tmp}/no-cuobjdump"], "no-cuobjdump"),
])
def test_sass_lint_refuses_what_it_cannot_lint(tmp_path, args, named):
    (tmp_path / "code.sass").write_text("garbage, not cuobjdump's output\n\x00\xff")
    (tmp_path / "not-a-binary.o").write_bytes(b"\x7fELF nope")
    refused(script("sass_lint.py", *[a.format(tmp=tmp_path) for a in args]), named=named)


@pytest.mark.parametrize("value", ["0", "x", "-3", "1000", "3; rm -rf /"])
def test_hopper_check_refuses_a_kernel_timeout_that_is_not_seconds(tmp_path, value):
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    (kit / "manifest.json").write_text("{}")
    before = snapshot(tmp_path)
    p = subprocess.run(["bash", ROOT / "tools/gpu/hopper_check.sh", "--kit", kit, "--out", tmp_path / "out"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S": value})
    refused(p, named="ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("ours, named", [
    ("{nope\n", "line 1"),
    ("[1]\n", "line 1"),
    ('{"kernel": "x", "median_s": -1}\n', "median_s"),
    ('{"kernel": "x", "median_s": "fast"}\n', "median_s"),
    ('{"kernel": "x", "median_s": 0}\n', "median_s"),
    (None, "--ours"),
])
def test_bench_sdpa_refuses_our_lines_before_it_runs(tmp_path, ours, named):
    path = tmp_path / "ours.jsonl"
    if ours is not None:
        path.write_text(ours)
    before = snapshot(tmp_path)
    p = script("bench_sdpa.py", "--device", "cpu", "--n", 8, "--d", 8, "--heads", 1, "--batch", 1, "--repeats", 1,
               "--ours", path, "--out", tmp_path / "out.jsonl")
    refused(p, named=named)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("args, named", [
    (["--n", "0"], "--n"),
    (["--repeats", "0"], "--repeats"),
    (["--heads", "-1"], "--heads"),
    (["--d", "x"], "--d"),
    (["--device", "tpu"], "--device"),
    (["--inputs", "{tmp}/nowhere.safetensors"], "--inputs"),
    (["--inputs", "{tmp}/garbage.safetensors"], "--inputs"),
    (["--frobnicate"], "unrecognized"),
])
def test_bench_sdpa_refuses_bad_options_in_one_line(tmp_path, args, named):
    (tmp_path / "garbage.safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b"not json")
    p = script("bench_sdpa.py", "--device", "cpu", *[a.format(tmp=tmp_path) for a in args])
    refused(p, named=named)


def probe_capture(path, tensors, metadata=None):
    import numpy as np
    from safetensors.numpy import save_file

    save_file({k: np.asarray(v) for k, v in tensors.items()}, str(path), metadata=metadata)


@pytest.mark.parametrize("tensors, metadata, named", [
    ({"A": [[1]]}, {"seed": "1"}, "lacks"),
    ({k: [[1]] for k in "ABCD"} | {"dist": [0]}, None, "seed"),
    ({k: [[1]] for k in "ABCD"} | {"dist": [[0]]}, {"seed": "1"}, "dist"),
    ({k: [[1]] for k in "ABCD"} | {"dist": [0, 0]}, {"seed": "1"}, "tile"),
    ({k: [1] for k in "ABCD"} | {"dist": [0]}, {"seed": "1"}, "tile"),
])
def test_trim_probe_refuses_a_file_that_is_not_a_capture_before_writing_any(tmp_path, tensors, metadata, named):
    import numpy as np

    good = tmp_path / "mma_good.safetensors"
    probe_capture(good, {k: np.ones((2, 4), np.uint16) for k in "ABCD"} | {"dist": np.zeros(2, np.uint8)},
                  {"seed": "1"})
    bad = tmp_path / "mma_bad.safetensors"
    probe_capture(bad, {k: np.asarray(v, np.uint16 if k != "dist" else np.uint8) for k, v in tensors.items()},
                  metadata)
    before = snapshot(tmp_path)
    p = script("trim_probe.py", good, bad, "--out", tmp_path / "out")
    refused(p, named=named)
    assert snapshot(tmp_path) == before, "not even the good capture's trimmed file"


def sized(header):
    """A safetensors file of just this header, its length in front."""
    return len(header).to_bytes(8, "little") + header


@pytest.mark.parametrize("content, named", [
    (b"", "shorter"),
    (b"\xff" * 8 + b"{}", "header claims"),
    (sized(b"{"), "not JSON"),
    (sized(b"[]"), "not a JSON object"),
    (sized(b'{"A": {"dtype": "F32", "shape": [4], "data_offsets": [0, 99]}}'), "data_offsets"),
    (sized(b'{"A": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}}') + b"\0" * 4, "dtype"),
])
def test_trim_probe_refuses_a_file_that_is_not_safetensors(tmp_path, content, named):
    path = tmp_path / "mma_x.safetensors"
    path.write_bytes(content)
    refused(script("trim_probe.py", path, "--out", tmp_path / "out"), named=named)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, args, named", [
    ("kit_pack.py", [], "required"),
    ("trim_probe.py", [], "required"),
    ("trim_probe.py", ["x", "--out", "o", "--keep", "many"], "--keep"),
    ("sdpa_capture.py", ["--inputs", "i", "--out", "o", "--bogus"], "unrecognized"),
    ("sdpa_capture.py", ["--inputs", "i", "--out", "o", "--backends", "flash,bogus"], "--backends"),
    ("ingest.py", ["x", "--golden", "g", "--cases", "("], "--cases"),
    ("ingest.py", ["x", "--golden", "g", "--cases", ""], "--cases"),
    ("torch_flash_sass.py", ["--bogus"], "unrecognized"),
    ("gen_wgmma_asm.py", ["--bogus"], "unrecognized"),
])
def test_every_kit_script_refuses_a_bad_option_in_one_line(tmp_path, name, args, named):
    refused(script(name, *args, cwd=tmp_path), named=named)
    assert list(tmp_path.iterdir()) == []


def shell_script(name, *args):
    return subprocess.run(["bash", ROOT / "tools/gpu" / name, *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, named", [
    (["--out", "{tmp}/users"], "not a kit"),
    (["--out", "{tmp}"], "holds"),
    (["--out", "{tmp}/build/.."], "holds"),
    (["--out", "{tmp}/build"], "not a kit"),
    (["--out", "{tmp}/users/notes.txt"], "is a file"),
    (["--out", ROOT], "holds"),
    (["--out"], "--out needs a folder"),
    (["--out", ""], "--out needs a folder"),
    (["--from"], "--from needs a folder"),
    (["--from", "{tmp}/no-build"], "not a folder"),
    (["--bogus"], "unknown argument"),
])
def test_build_kit_never_replaces_what_is_not_a_kit(tmp_path, args, named):
    """build_kit.sh replaces its --out whole (rm -rf): a folder of a user's files, the repository,
    the build or a folder holding them is refused, before anything is built or removed."""
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "notes.txt").write_text("a user's file")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "CMakeCache.txt").write_text("")
    before = snapshot(tmp_path)
    p = shell_script("build_kit.sh", "--from", tmp_path / "build", *[str(a).format(tmp=tmp_path) for a in args])
    refused(p, named=named)
    assert snapshot(tmp_path) == before
    assert (ROOT / "README.md").exists()


@pytest.mark.parametrize("args, named", [
    (["A", "B"], "one phase a run"),
    (["A", "--kit"], "--kit needs a folder"),
    (["A", "--out"], "--out needs a folder"),
    (["A", "--out", "{tmp}/notes.txt"], "is a file"),
    (["A", "--out", "{tmp}/notes.txt/sub"], "cannot make"),
    (["A", "--out", "{kit}"], "inside the kit"),
    (["A", "--out", "{kit}/bin"], "inside the kit"),
    (["A", "--kit", "{tmp}"], "no kit"),
    (["D"], "unknown argument"),
    ([], "which phase"),
    (["H", "B"], "one phase a run"),
    (["H", "--out", "{kit}"], "inside the kit"),
])
def test_run_all_refuses_bad_arguments_before_any_step(tmp_path, args, named):
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    (kit / "manifest.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("a user's file")
    before = snapshot(tmp_path)
    defaults = ["--kit", kit] if "--kit" not in args else []
    p = shell_script("run_all.sh", *[str(a).format(tmp=tmp_path, kit=kit) for a in args], *defaults)
    refused(p, named=named)
    assert snapshot(tmp_path) == before


def test_the_estimate_beside_the_bench_takes_only_numbers_it_can_trust():
    """ingest's phase H puts each h100-bf16 estimate beside its measured speed and scales it by
    the tensor cores' measured rate; a line of the wrong type or a non-number figure gives None
    or no entry, never a crash or a figure made from it."""
    sys.path.insert(0, str(ROOT / "tools" / "gpu"))
    import ingest

    name = "_ZN10roundscope3gpu6hopper14forward_kernelILi128ELNS_3emu8Exp2KindE3ELNS3_7Exp2ArgE1ELb0EEEvNS1_13FP"
    estimate = {"kernel": name, "launch": {"shape": [1, 64, 4096], "tflops": {"stated": 900.0}}}
    bench = [{"kernel": "torch matmul", "tflops": 659.6},
             {"kernel": "roundscope hopper h100-bf16 exp2=ex2.approx.ftz", "heads": 64, "n": 4096, "d": 128,
              "tflops": 600.0}]
    [e] = ingest.estimate_beside_bench([estimate], bench)
    assert e["kernel"] == bench[1]["kernel"] and e["d"] == 128 and e["measured"] == 600.0
    assert e["estimate_at_measured_tensor_rate"] == pytest.approx(900.0 * 659.6 / 989.4, rel=1e-3)
    # another shape is not this estimate's measurement; no matmul line: no scaled figure
    [e] = ingest.estimate_beside_bench([estimate], [dict(bench[1], n=2048)])
    assert e["measured"] is None and e["estimate_at_measured_tensor_rate"] is None
    hostile = [{"kernel": 7}, {"kernel": name, "launch": "x"}, {"kernel": name, "launch": {"tflops": [1]}},
               {"kernel": name.replace("KindE3", "KindE1"), "launch": estimate["launch"]},
               {"kernel": name, "launch": {"shape": [1, 64, 4096], "tflops": {"stated": "NaN"}}}]
    out = ingest.estimate_beside_bench(hostile, [{"kernel": "torch matmul", "tflops": float("inf")}] + bench[1:])
    assert len(out) == 1 and out[0]["estimate_at_quoted_peak"] is None
    assert out[0]["estimate_at_measured_tensor_rate"] is None and out[0]["measured"] == 600.0


def test_ingest_refuses_a_backward_capture_missing_one_of_a_case_s_gradients(tmp_path):
    """A backward capture whose case has dQ but no dV (found by fuzz_ingest): one line naming the
    missing gradient, exit 2, before anything is compared, nothing written."""
    import torch

    meta = {**GOOD_META, "shape": "S1"}
    grads = {"flash.bf16.s.full.dq": torch.zeros(1, 4, 2), "flash.bf16.s.full.dk": torch.zeros(1, 4, 2)}
    members = {"sdpa/sdpa_S1_bf16_fwd.safetensors": capture(meta),
               "sdpa/sdpa_S1_bf16_bwd.safetensors": capture(meta, grads)}
    folder = ingest_phase(tmp_path, "C", members)
    bins = fake_bins(tmp_path)
    before = snapshot(tmp_path)
    p = ingest(folder, "--golden", tmp_path / "golden", "--bin", bins, "--json", tmp_path / "report.json")
    refused(p, named="flash.bf16.s.full.dv")
    assert snapshot(tmp_path) == before, "nothing written"
