"""`roundscope mma` and `roundscope probe` per docs/cli.md: --check on the H100 golden vectors
(exit 0, JSON keys), a flipped bit found and named (exit 1), -o writing D, --list, and one-line
errors with exit 2 for bad files; probe exits 3 without a GPU."""
import json

import pytest

from conftest import GOLDEN
from files_by_hand import read_safetensors, write_safetensors

BF16 = GOLDEN / "mma_bf16.safetensors"


@pytest.fixture(scope="module")
def golden():
    return read_safetensors(BF16)


def test_check_on_the_golden_vectors(cli):
    j = cli.json("mma", BF16, "--arch", "sm90", "--check")
    assert all(k in j for k in ("arch", "instruction", "matched", "total", "first_mismatches")), j
    assert j["matched"] == j["total"] == 327680


def test_one_flipped_bit_exits_1_and_is_located(cli, golden, tmp_path):
    tensors, meta = golden
    dtype, shape, raw = tensors["D"]
    flipped = bytearray(raw)
    flipped[((3 * 16 + 2) * 8 + 5) * 4] ^= 1  # tile 3, row 2, column 5
    write_safetensors(tmp_path / "flipped.safetensors", {**tensors, "D": (dtype, shape, bytes(flipped))}, meta)
    p = cli.run("mma", tmp_path / "flipped.safetensors", "--arch", "sm90", "--check", "--json", check=False)
    assert p.returncode == 1, p.stderr
    j = json.loads(p.stdout)
    assert j["matched"] == 327679
    first = j["first_mismatches"][0]
    assert (first["tile"], first["row"], first["col"]) == (3, 2, 5), first


def test_output_d_equals_the_gpus(cli, golden, tmp_path):
    cli.run("mma", BF16, "--arch", "sm90", "-o", tmp_path / "d.safetensors")
    written, _ = read_safetensors(tmp_path / "d.safetensors")
    assert written["D"] == golden[0]["D"]


def test_the_wgmma_fp8_model_does_not_fit_mma_sync_tiles(cli):
    what_if = cli.run("mma", GOLDEN / "mma_e4m3.safetensors", "--instruction", "wgmma", "--check", check=False)
    assert what_if.returncode == 1


def test_list_names_every_architecture(cli):
    assert {m["arch"] for m in cli.json("mma", "--list")["models"]} >= {"sm80", "sm89", "sm90", "sm100"}


def test_bad_files_get_one_line(cli, golden, tmp_path):
    tensors, meta = golden

    def message(name, replaced, *args):
        write_safetensors(tmp_path / name, {k: v for k, v in {**tensors, **replaced}.items() if v is not None}, meta)
        return cli.error("mma", tmp_path / name, "--arch", "sm90", *args)

    m = message("no_b.safetensors", {"B": None})
    assert "no_b.safetensors" in m and "'B'" in m, m
    dtype, shape, raw = tensors["C"]
    m = message("wrong_shape.safetensors", {"C": (dtype, [shape[0], 8, 16], raw)})
    assert "'C'" in m and "[2560, 8, 16]" in m, m
    dtype, shape, raw = tensors["A"]
    m = message("int_a.safetensors", {"A": ("I16", shape, raw)})
    assert "'A'" in m and "not a floating format" in m, m
    assert "'D'" in message("no_d.safetensors", {"D": None}, "--check")
    m = cli.error("mma", BF16, "--arch", "sm75")
    assert m.startswith("--arch: ") and "sm75" in m, m
    m = cli.error("mma", GOLDEN / "mma_e4m3.safetensors", "--arch", "sm80")
    assert "sm80" in m and "e4m3" in m, m
    (tmp_path / "truncated.safetensors").write_bytes(BF16.read_bytes()[:100000])
    assert "truncated.safetensors" in cli.error("mma", tmp_path / "truncated.safetensors", "--arch", "sm90", "--check")


def test_probe_without_a_gpu_exits_3(cli, tmp_path):
    p = cli.run("probe", "--out", tmp_path / "probe", check=False)
    assert p.returncode == 3 or (p.returncode == 0 and (tmp_path / "probe" / "mma_bf16.safetensors").exists()), p.stderr


def test_mma_check_reads_the_captures_device_and_instruction_as_check_does(cli, tmp_path):
    """A capture's metadata names its device and PTX instruction: `mma --check` checks it against
    that device's model, as `check` does (an sm_89-marked H100 capture fails both), unless --arch
    asks for another (then the JSON names the capture's too), and refuses an instruction that is
    neither mma.sync nor wgmma and a device with no model of the capture's inputs (FP8 on
    sm_80)."""
    import roundscope as rs

    def capture(name, source, **metadata):
        tensors = rs.read(GOLDEN / source)
        meta = {**rs.read_metadata(GOLDEN / source), **metadata}
        (tmp_path / name).mkdir()
        rs.write(tmp_path / name / source, tensors, meta)
        return tmp_path / name / source

    sm89 = capture("sm89", "mma_bf16.safetensors", device="NVIDIA GeForce RTX 4090 (sm_89)")
    mine, theirs = cli.run("mma", sm89, "--check", "--json", check=False), cli.json("check", sm89.parent, check=False)
    assert mine.returncode == 1 and theirs["failed"] == 1
    assert json.loads(mine.stdout)["arch"] == "sm89"
    assert json.loads(mine.stdout)["matched"] == theirs["checks"][0]["matched"]
    what_if = cli.json("mma", sm89, "--check", "--arch", "sm90")
    assert what_if["arch"] == "sm90" and what_if["capture"] == {"arch": "sm89", "instruction": "mma.sync"}
    odd = capture("odd", "mma_bf16.safetensors", instruction="m99n8k16")
    for args in (["mma", odd, "--check"], ["check", odd.parent]):
        m = cli.error(*args)
        assert "instruction" in m and "m99n8k16" in m, m
    fp8 = capture("fp8_sm80", "mma_e4m3.safetensors", device="NVIDIA A100 (sm_80)")
    for args in (["mma", fp8, "--check"], ["check", fp8.parent]):
        m = cli.error(*args)
        assert "sm80" in m, m
