"""The GPU kit's dry run (ctest label `kit`): on a machine without a GPU, the kit is packaged from
this build, each phase runs with its stand-ins (the simulated GPU, an invented MUFU, PyTorch on
the CPU), its output is held to the budgets and the summary's schema, and ingest turns it into
golden files whose checks pass; the fitting tools recover the invented unit bit for bit on all
2^32 inputs. Negative controls: a corrupted capture, a failing step, files over the budgets."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools" / "gpu"
BUILD = pathlib.Path(os.environ.get("ROUNDSCOPE_BUILD", ROOT / "build"))
sys.path.insert(0, str(TOOLS))

import kit_check  # noqa: E402
import kit_pack  # noqa: E402


def run(*cmd, timeout=900, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit") / "kit"
    p = run(TOOLS / "build_kit.sh", "--from", BUILD, "--out", out)
    assert p.returncode == 0, p.stderr + p.stdout
    return out


def dry_run(kit, phase, out, **kw):
    return run(TOOLS / "run_all.sh", phase, "--dry-run", "--kit", kit, "--out", out, **kw)


def ingest(phase_dir, golden, kit):
    return run(sys.executable, TOOLS / "ingest.py", phase_dir, "--golden", golden, "--bin", kit / "bin",
               "--json", golden / "report.json")


def test_the_kit_is_complete_and_its_manifest_true(kit):
    manifest = json.loads((kit / "manifest.json").read_text())
    # 56 MiB for a kit of sm_90a code (what travels beside the tracked files, the golden ones set
    # aside); packaged from a build for more architectures (a CUDA build's sm_80 and sm_89 code
    # in every program), the 64 MiB carry limit
    wider = "bin/test_gpu_mma" in manifest["gpu_programs"] and manifest["cuda_architectures"] != "90a-real;90-virtual"
    assert manifest["bytes"] < (64 if wider else 56) * 2**20
    for f in manifest["files"]:
        data = (kit / f["path"]).read_bytes()
        assert len(data) == f["bytes"] and hashlib.sha256(data).hexdigest() == f["sha256"], f["path"]
    for program in ("mufu_probe", "mufu_fit", "kit_inputs", "gpu_sweep_host", "test_gpu_host"):
        assert (kit / "bin" / program).exists()
    ldd = run("ldd", kit / "bin" / "mufu_fit", env={**os.environ, "LD_LIBRARY_PATH": str(kit / "lib")})
    assert "not found" not in ldd.stdout


@pytest.mark.parametrize("phase", ["A", "B", "C"])
def test_each_phase_runs_dry_within_the_budgets_and_ingests(kit, tmp_path, phase):
    out = tmp_path / "out"
    p = dry_run(kit, phase, out)
    assert p.returncode == 0, p.stdout + p.stderr
    c = run(sys.executable, TOOLS / "kit_check.py", out)
    assert c.returncode == 0, c.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] and summary["passed"] and summary["phase"] == phase
    assert summary["timeouts_s"] <= 540
    i = ingest(out, tmp_path / "golden", kit)
    assert i.returncode == 0, i.stdout + i.stderr
    report = json.loads((tmp_path / "golden" / "report.json").read_text())
    golden = tmp_path / "golden" / f"phase-{phase}"
    assert json.loads((golden / "golden.json").read_text())["archives"] == summary["archives"]
    if phase == "A":
        # The fitting tools recovered the invented unit bit for bit from its windows and digests.
        fits = json.loads((golden / "mufu_fit.json").read_text())
        assert sorted(f["variant"] for f in fits) == ["ex2.approx.f32", "lg2.approx.f32", "rcp.approx.ftz.f32"]
        for f in fits:
            assert f["unit"] == "fake" and f["exact_chunks"] == 2**16 and f["failing_ranges"] == [], f
        assert sorted(p.name for p in (golden / "mufu-models").iterdir()) == [
            "ex2.approx.f32.model.safetensors", "lg2.approx.f32.model.safetensors",
            "rcp.approx.ftz.f32.model.safetensors"]
    if phase == "B":
        assert report["sweep"]["cases"] == 24 and report["sweep"]["not_exact"] == 0  # 3 presets x 8
        kernels = {line["kernel"]: line for line in report["bench"]}
        ours = ("roundscope fa2-bf16", "roundscope fa3-fp8", "roundscope hopper h100-bf16")
        assert set(kernels) == {*ours, "torch flash", "torch math"}
        for name in ours:
            assert kernels[name]["tflops"] > 0 and set(kernels[name]["ratio_to"]) == {"torch flash", "torch math"}
    if phase == "C":
        # S1's flash forward and backward (BF16, FP16) on the CPU, four scenarios, causal and not
        fused = [e for e in report["sdpa"] if not e["case"].startswith("math.")]
        assert sorted((e["pass"], e["dtype"]) for e in fused) == \
            [(way, dtype) for way in ("backward", "forward") for dtype in ("bf16", "f16") for _ in range(8)]
        # flash's backward in deterministic mode, captured but modelled by no recipe: named, not passed over
        assert sorted(e["case"].split(".")[:2] for e in report["sdpa_not_compared"]) == \
            [["flash-deterministic", dtype] for dtype in ("bf16", "f16") for _ in range(8)]
        # and the math path, PyTorch's on the CPU, compared with the GPU's (torch-math-sm90) for its fraction
        math = [e for e in report["sdpa"] if e["case"].startswith("math.")]
        assert sorted(e["dtype"] for e in math) == ["bf16"] * 8 + ["f16"] * 8
        assert all(e["torch-math-sm90"]["total"] == 2 * 128 * 64 for e in math), math
        for e in fused:
            o_lse = 2 * 128 * 64 + 2 * 128  # o and lse of S1's two heads
            for recipe in ("torch-flash-sm90", f"fa2-{e['dtype']}"):
                assert e[recipe]["total"] == o_lse + (3 * 2 * 128 * 64 if e["pass"] == "backward" else 0), e


@pytest.fixture(scope="module")
def hopper_check(kit, tmp_path_factory):
    """The one-call Hopper check's dry run (tools/gpu/hopper_check.sh), checked and ingested."""
    folder = tmp_path_factory.mktemp("hopper_check")
    out = folder / "out"
    p = run(TOOLS / "hopper_check.sh", "--dry-run", "--kit", kit, "--out", out)
    assert p.returncode == 0, p.stdout + p.stderr
    i = ingest(out, folder / "golden", kit)
    assert i.returncode == 0, i.stdout + i.stderr
    return out, json.loads((folder / "golden" / "report.json").read_text())


def test_the_hopper_check_runs_dry_in_one_archive_within_its_budget(hopper_check):
    out, report = hopper_check
    c = run(sys.executable, TOOLS / "kit_check.py", out)
    assert c.returncode == 0, c.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["phase"] == "H" and summary["passed"] and summary["dry_run"]
    assert summary["timeouts_s"] <= 480 == summary["budgets"]["max_phase_timeout_s"]  # one call, 8 minutes
    assert [a["archive"] for a in summary["archives"]] == ["H-all.tar.xz"]
    steps = [s["name"] for s in summary["steps"]]
    assert steps[:3] == ["metadata", "smoke", "sweep"]  # the Hopper kernel first
    # both exp2 forms swept bit-exact: N 1 and 65, D 64, random and sink, causal and not; the
    # first sweep the FP8 kernel's h100-fp8 too
    assert report["sweep"]["cases"] == 16 and report["sweep-ex2"]["cases"] == 8
    assert report["sweep"]["not_exact"] == report["sweep-ex2"]["not_exact"] == 0
    # the raw answers: four cases a form, each every bit of o and lse against the emulator
    goldens = report["goldens"]
    assert len(goldens) == 8 and all(g["exact"] for g in goldens), goldens
    assert sorted(g["settings"] for g in goldens) == [[]] * 4 + [["exp2=ex2.approx.ftz"]] * 4
    kernels = {line["kernel"] for line in report["bench"]}
    # and the tensor cores' own rate, a matmul, what the SASS estimate scales by
    assert {"roundscope hopper h100-bf16", "roundscope hopper h100-bf16 exp2=ex2.approx.ftz",
            "roundscope hopper h100-fp8", "torch flash", "torch matmul"} <= kernels
    # each h100-bf16 kernel the SASS estimate covers, beside its measured speed (none where the
    # dry run's build has no sm_90a code to estimate)
    beside = report["estimate_beside_bench"]
    if report["sass_estimate"]:
        names = ("roundscope hopper h100-bf16", "roundscope hopper h100-bf16 exp2=ex2.approx.ftz")
        assert sorted((b["kernel"], b["d"]) for b in beside) == sorted((k, d) for k in names for d in (64, 128))
    else:
        assert beside == []


def test_a_golden_answer_one_bit_off_fails(hopper_check, tmp_path):
    """A negative control of the Hopper goldens' check: o's first element one ulp off."""
    import ingest as ingest_module

    out, _ = hopper_check
    import tarfile
    with tarfile.open(out / "H-all.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    dump = sorted((tmp_path / "goldens" / "default").glob("*.safetensors"))[0]
    bins = {"roundscope": BUILD / "roundscope"}
    assert ingest_module.kernel_dump_check(bins["roundscope"], dump)["exact"]
    data = bytearray(dump.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    begin = 8 + header_len + json.loads(data[8:8 + header_len])["o"]["data_offsets"][0]
    data[begin] ^= 1
    dump.write_bytes(bytes(data))
    entry = ingest_module.kernel_dump_check(bins["roundscope"], dump)
    assert not entry["exact"] and entry["outputs"]["o"]["matched"] == entry["outputs"]["o"]["total"] - 1, entry


def test_a_hung_hopper_kernel_skips_the_later_kernel_steps(kit, tmp_path):
    """A kernel step that outlives its timeout (a sweep program that sleeps) stops the Hopper
    kernel's later steps; the rest of the check still runs and the check fails."""
    broken = tmp_path / "kit"
    shutil.copytree(kit, broken, symlinks=True)
    (broken / "bin" / "gpu_sweep_host").write_text("#!/bin/sh\nexec sleep 600\n")
    out = tmp_path / "out"
    p = run(TOOLS / "hopper_check.sh", "--dry-run", "--kit", broken, "--out", out, timeout=200,
            env={**os.environ, "ROUNDSCOPE_KIT_KERNEL_TIMEOUT_S": "3"})
    assert p.returncode == 1, p.stdout + p.stderr
    steps = {s["name"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    assert steps["smoke"]["status"] == "timeout"
    for name in ("sweep", "sweep-ex2", "goldens"):
        assert steps[name]["status"] == "skipped" and "hung in step smoke" in steps[name]["why"], steps[name]
    assert steps["layout"]["status"] == "ok" and steps["bench"]["status"] == "ok"


def test_a_corrupted_capture_is_not_fitted(kit, tmp_path):
    """One output of the window the exp2 table is read from, changed by one ulp: the two's
    complement structure fails the other windows; the sign-magnitude one, whose T+ comes from
    another window, may pass them, and then the digests catch the wrong table entry. Either way
    mufu_fit fits nothing exact and says so (exit 1)."""
    capture = tmp_path / "mufu_ex2.approx.ftz.f32.safetensors"
    p = run(kit / "bin" / "mufu_probe", "--fake", "--variants", "ex2.approx.ftz.f32", "--out", tmp_path)
    assert p.returncode == 0, p.stderr
    data = bytearray(capture.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_len])
    begin = 8 + header_len + header["window0.step"]["data_offsets"][0]
    signed = lambda b: b - 256 if b > 127 else b  # noqa: E731
    # Output j one ulp higher, the rest unchanged: step j up by one, step j + 1 down by one.
    j = next(j for j in range(1000, 5000) if -100 < signed(data[begin + j]) < 100 and
             -100 < signed(data[begin + j + 1]) < 100)
    data[begin + j] = (data[begin + j] + 1) % 256
    data[begin + j + 1] = (data[begin + j + 1] - 1) % 256
    capture.write_bytes(bytes(data))
    f = run(kit / "bin" / "mufu_fit", capture)
    assert f.returncode == 1, f.stdout + f.stderr
    assert "no hypothesis reproduces every window" in f.stdout or "(all 2^32 inputs: NOT exact)" in f.stdout, f.stdout
    assert "bit-exact)" not in f.stdout


def test_a_failing_step_is_recorded_and_the_phase_goes_on(kit, tmp_path):
    broken = tmp_path / "kit"
    shutil.copytree(kit, broken, symlinks=True)
    (broken / "bin" / "gpu_sweep_host").write_text("#!/bin/sh\necho broken on purpose >&2\nexit 5\n")
    out = tmp_path / "out"
    p = dry_run(broken, "B", out)
    assert p.returncode == 1
    summary = json.loads((out / "summary.json").read_text())
    steps = {s["name"]: s for s in summary["steps"]}
    assert steps["sweep"]["status"] == "failed" and steps["sweep"]["rc"] == 5
    assert steps["bench"]["status"] == "ok"  # the step after it still ran
    assert not summary["passed"]
    assert "sweep: failed" in run(sys.executable, TOOLS / "kit_check.py", out).stdout
    assert run(sys.executable, TOOLS / "kit_check.py", out, "--allow-failed-steps").returncode == 0


def test_kit_check_refuses_what_breaks_a_budget(kit, tmp_path):
    out = tmp_path / "out"
    assert dry_run(kit, "B", out).returncode == 0
    assert kit_check.problems(out, False) == []
    (out / "stray.txt").write_text("x")
    assert any("not listed" in x for x in kit_check.problems(out, False))
    (out / "stray.txt").unlink()
    archive = next(out.glob("*.tar.xz"))
    archive.write_bytes(archive.read_bytes() + b"\0")
    assert any("SHA-256" in x for x in kit_check.problems(out, False))


def test_kit_pack_keeps_the_most_valuable_files_within_the_limits(tmp_path, monkeypatch):
    """Budgets scaled down 2^10-fold: an incompressible step too big for one archive is packed
    file by file, most valuable first, and what does not fit is dropped with the reason."""
    monkeypatch.setattr(kit_pack, "MAX_FILE_BYTES", 15 * 1024)
    monkeypatch.setattr(kit_pack, "MAX_PHASE_BYTES", 60 * 1024)
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "mufu.log").write_text("ok\n")
    (work / "mufu").mkdir()
    names = ["mufu_rcp.approx.ftz.f32", "mufu_ex2.approx.f32", "mufu_lg2.approx.f32", "mufu_ex2.approx.ftz.f32",
             "mufu_lg2.approx.ftz.f32", "mufu_huge"]
    for i, name in enumerate(names):
        size = 40 * 1024 if name == "mufu_huge" else 14 * 1024
        (work / "mufu" / f"{name}.safetensors").write_bytes(os.urandom(size - 200))
    (work / "steps.jsonl").write_text(json.dumps({"name": "mufu", "status": "ok", "rc": 0, "timeout_s": 150,
                                                  "seconds": 1.0}) + "\n")
    out = tmp_path / "out"
    assert kit_pack.main(["--phase", "A", "--work", str(work), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    kept = [a["archive"] for a in summary["archives"]]
    assert kept == ["A-logs.tar.xz", "A-mufu-mufu_ex2.approx.f32.tar.xz", "A-mufu-mufu_lg2.approx.f32.tar.xz",
                    "A-mufu-mufu_ex2.approx.ftz.f32.tar.xz", "A-mufu-mufu_lg2.approx.ftz.f32.tar.xz"]
    dropped = {d["archive"]: d["why"] for d in summary["dropped"]}
    assert "over the 15360-byte file limit" in dropped["A-mufu-mufu_huge.tar.xz"]
    assert "over 61440" in dropped["A-mufu-mufu_rcp.approx.ftz.f32.tar.xz"]
    assert all(p.stat().st_size <= 15 * 1024 for p in out.iterdir())


def test_kit_pack_joins_files_into_as_few_archives_as_fit(tmp_path, monkeypatch):
    """A step too big for one archive but made of files that fit several to an archive (the SDPA
    captures: 25 files, about 20 MB) comes back in few archives, not one a file: the device tool
    returns at most 8 files, and one a file dropped the backward captures (H200, 2026-12-04)."""
    monkeypatch.setattr(kit_pack, "MAX_FILE_BYTES", 15 * 1024)
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "sdpa.log").write_text("ok\n")
    (work / "sdpa").mkdir()
    for i in range(12):  # 12 incompressible files of 4 KiB: three to an archive, never all in one
        (work / "sdpa" / f"sdpa_S{i:02d}_bf16_bwd.safetensors").write_bytes(os.urandom(4 * 1024))
    (work / "steps.jsonl").write_text(json.dumps({"name": "sdpa", "status": "ok", "rc": 0, "timeout_s": 200,
                                                  "seconds": 1.0}) + "\n")
    out = tmp_path / "out"
    assert kit_pack.main(["--phase", "C", "--work", str(work), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dropped"] == []
    archives = [a for a in summary["archives"] if a["archive"] != "C-logs.tar.xz"]
    assert len(archives) == 4 and all(len(a["files"]) == 3 for a in archives)
    assert archives[0]["archive"] == "C-sdpa-sdpa_S00_bf16_bwd-and-2-more.tar.xz"
    assert sorted(f for a in archives for f in a["files"]) == [f"sdpa/sdpa_S{i:02d}_bf16_bwd.safetensors"
                                                               for i in range(12)]
    assert all(p.stat().st_size <= 15 * 1024 for p in out.iterdir())
