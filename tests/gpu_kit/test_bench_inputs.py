"""The benchmark's shared inputs (`--inputs`, a kit_inputs file): bench_sdpa.py and
bench_flash_gpu (its simulated-GPU build here) time the file's q, k and v, the shape taken from
it; a missing, corrupt or mismatched file is refused with exit 2 before any work, the first line
naming --inputs (bench_flash_gpu adds its usage line, as the kit's programs do)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ["ROUNDSCOPE_CLI"]).parent
BENCH_SDPA = ROOT / "tools" / "gpu" / "bench_sdpa.py"
BENCH_OURS = BUILD / "tools" / "gpu" / "bench_flash_gpu_host"
KIT_INPUTS = BUILD / "tools" / "gpu" / "kit_inputs"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "inputs.safetensors"
    subprocess.run([KIT_INPUTS, "--scenario", "random", "--heads", "2", "--n", "64", "--d", "64", "--seed", "1",
                    "-o", path], check=True)
    return path


def test_both_benchmarks_time_the_files_inputs_and_pair_up(inputs, tmp_path):
    ours = tmp_path / "ours.jsonl"
    p = subprocess.run([BENCH_OURS, "--presets", "h100-bf16", "--inputs", inputs, "--repeats", "1", "--out", ours],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    line = json.loads(ours.read_text())
    assert line["kernel"] == "roundscope hopper h100-bf16" and (line["heads"], line["n"], line["d"]) == (2, 64, 64)
    p = subprocess.run([sys.executable, BENCH_SDPA, "--device", "cpu", "--inputs", inputs, "--repeats", "1",
                        "--ours", ours], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    torch_lines = [x for x in lines if x["kernel"].startswith("torch")]
    assert torch_lines and all((x["batch"], x["heads"], x["n"], x["d"]) == (1, 2, 64, 64) for x in torch_lines)
    assert set(lines[-1]["ratio_to"]) == {x["kernel"] for x in torch_lines if "median_s" in x}


def test_the_tensor_cores_rate_is_timed_beside_and_no_ratio_is_set_against_it(inputs, tmp_path):
    """--gemm SIZE: one "torch matmul" line (a BF16 SIZE^3 product), what the SASS estimate's
    figures at the quoted peak scale by; our kernels' ratios stay against the attention backends."""
    ours = tmp_path / "ours.jsonl"
    p = subprocess.run([BENCH_OURS, "--presets", "h100-bf16", "--inputs", inputs, "--repeats", "1", "--out", ours],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, BENCH_SDPA, "--device", "cpu", "--inputs", inputs, "--repeats", "2",
                        "--gemm", "48", "--ours", ours], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    gemm = [x for x in lines if x["kernel"] == "torch matmul"]
    assert len(gemm) == 1 and gemm[0]["gemm"] == [48, 48, 48] and gemm[0]["tflops"] > 0, gemm
    assert gemm[0]["tflops"] == pytest.approx(2 * 48 ** 3 / gemm[0]["median_s"] / 1e12)
    assert "torch matmul" not in lines[-1]["ratio_to"] and "torch flash" in lines[-1]["ratio_to"], lines[-1]
    for bad in ("0", "40000", "x"):
        p = subprocess.run([sys.executable, BENCH_SDPA, "--device", "cpu", "--gemm", bad], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and p.stdout == "" and "--gemm" in p.stderr, (bad, p.stderr)


@pytest.mark.parametrize("case", ["missing", "corrupt", "mismatch"])
def test_a_bad_inputs_file_is_refused(tmp_path, case):
    path = tmp_path / f"{case}.safetensors"
    if case == "corrupt":
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{x")
    elif case == "mismatch":
        import torch
        from safetensors.torch import save_file
        save_file({"q": torch.zeros(2, 4, 8), "k": torch.zeros(2, 5, 8), "v": torch.zeros(2, 4, 8)}, path)
    for cmd in ([sys.executable, BENCH_SDPA, "--device", "cpu", "--inputs", path],
                [BENCH_OURS, "--presets", "h100-bf16", "--inputs", path]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stdout == "", (cmd, p.stdout, p.stderr)
        assert "--inputs" in p.stderr.splitlines()[0], p.stderr


SWEEP = BUILD / "tools" / "gpu" / "gpu_sweep_host"


def test_set_changes_every_preset_and_a_bad_setting_is_refused(inputs, tmp_path):
    """--set KEY=VALUE (the device check's new recipe values, e.g. exp2=ex2.approx.ftz): the sweep
    holds the changed preset's kernel to the emulator and says which setting ran; a preset the
    change makes inconsistent is a line with runnable false; a key the table refuses exits 2."""
    sweep = tmp_path / "sweep.jsonl"
    p = subprocess.run([SWEEP, "--presets", "h100-bf16,fa2-bf16-max-adjust", "--set", "exp2=ex2.approx.ftz",
                        "--set", "rescale_arg=raw", "--n", "65", "--d", "64", "--scenarios", "sink",
                        "--forward-only", "--out", sweep], capture_output=True, text=True, timeout=600)
    lines = [json.loads(x) for x in sweep.read_text().splitlines()]
    ran = [x for x in lines if x["preset"] == "h100-bf16"]
    assert len(ran) == 2 and all(x["exact"] and x["kernel"] == "hopper" for x in ran), ran
    assert all(x["settings"] == ["exp2=ex2.approx.ftz", "rescale_arg=raw"] for x in ran)
    refused = [x for x in lines if x["preset"] == "fa2-bf16-max-adjust"]
    assert len(refused) == 1 and not refused[0]["runnable"] and "rescale_arg" in refused[0]["why"], refused
    assert p.returncode == 0, p.stderr  # every case that ran is bit-exact
    ours = tmp_path / "ours.jsonl"
    p = subprocess.run([BENCH_OURS, "--presets", "h100-bf16", "--inputs", inputs, "--repeats", "1",
                        "--set", "exp2=ex2.approx.ftz", "--out", ours], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    line = json.loads(ours.read_text())
    # the kernel's name carries its settings, so two runs of one preset stay apart in a table
    assert line["kernel"] == "roundscope hopper h100-bf16 exp2=ex2.approx.ftz", line
    assert line["settings"] == ["exp2=ex2.approx.ftz"], line
    for program in (SWEEP, BENCH_OURS):
        p = subprocess.run([program, "--set", "exp2=ex3"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and p.stdout == "", (program, p.stdout, p.stderr)
        assert "--set" in p.stderr.splitlines()[0] and "exp2" in p.stderr, p.stderr
