"""`roundscope check DIR`: the repository's H100 golden files pass; one flipped bit in a copy
fails that file alone (exit 1, JUnit failure); attention dumps naming a recipe pass when their
outputs are the recipe's and fail when the recipe's settings differ; unusable input stops the
run with one line and exit 2 before any check."""
import json
import os
import random
import shutil
import struct
import xml.etree.ElementTree as ET

import pytest

from conftest import GOLDEN
from files_by_hand import read_safetensors, write_safetensors

H, N, D = 2, 48, 16


def junit(path):
    root = ET.parse(path).getroot()
    return root, {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def gaussian(count, seed, scale):
    r = random.Random(seed)
    return struct.pack(f"<{count}f", *(r.gauss(0, scale) for _ in range(count)))


# The conversion digests cover every float32 (about 30 s on 2 cores): checked once, below.
WITHOUT_CONVERSIONS = shutil.ignore_patterns("conversions.safetensors")


def test_the_golden_files_pass(cli, tmp_path):
    xml = tmp_path / "golden.xml"
    out = cli.run("check", GOLDEN, "--junit", xml).stdout
    # The four mma.sync files of the first H100 capture; the 2026-11-27 probe's four conversion
    # digests, four mma.sync and eight wgmma files.
    assert out.count("PASS ") == 20 and "20 of 20 checks passed" in out, out
    root, cases = junit(xml)
    assert root.get("tests") == "20" and root.get("failures") == "0" and len(cases) == 20, ET.tostring(root)[:300]


def test_one_flipped_bit_fails_that_file_alone(cli, tmp_path):
    flipped = tmp_path / "flipped"
    shutil.copytree(GOLDEN, flipped, ignore=WITHOUT_CONVERSIONS)
    target = flipped / "mma_e4m3.safetensors"
    tensors, metadata = read_safetensors(target)
    dtype, shape, raw = tensors["D"]
    raw = bytearray(raw)
    raw[4 * 1000] ^= 1  # element 1000 = tile 7, element 104
    tensors["D"] = (dtype, shape, bytes(raw))
    write_safetensors(target, tensors, metadata)
    xml = tmp_path / "golden.xml"
    p = cli.run("check", flipped, "--json", "--junit", xml, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    j = json.loads(p.stdout)
    failed = [c for c in j["checks"] if not c["passed"]]
    assert j["failed"] == 1 and len(failed) == 1, failed
    assert failed[0]["file"] == str(target) and failed[0]["matched"] == failed[0]["total"] - 1, failed
    assert "tile 7 at element 104" in failed[0]["detail"], failed
    root, cases = junit(xml)
    failures = [c for c in cases.values() if c.find("failure") is not None]
    assert root.get("failures") == "1" and len(failures) == 1, ET.tostring(root)[:400]
    assert failures[0].get("classname") == str(target)
    assert "1 of 327680 differ" in failures[0].find("failure").get("message")


@pytest.fixture
def dumps(cli, tmp_path):
    """A folder with a dump of fa3-bf16's own outputs (layer0/step1) and a file that is not golden,
    and a function writing more dumps of the same tensors with other metadata."""
    folder = tmp_path / "dumps"
    (folder / "layer0").mkdir(parents=True)
    inputs = {name: ("F32", [H, N, D], gaussian(H * N * D, seed, scale))
              for seed, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0), ("do", 1.0)])}
    write_safetensors(tmp_path / "in.safetensors", inputs, {"causal": "true"})
    cli.run("attention", tmp_path / "in.safetensors", "--recipe", "fa3-bf16", "--backward", "-o",
            tmp_path / "emu.safetensors")
    emulated, _ = read_safetensors(tmp_path / "emu.safetensors")
    outputs = {k: emulated[k] for k in ("o", "lse", "dq", "dk", "dv")}

    def dump(name, metadata):
        path = folder / name
        write_safetensors(path, {**inputs, **outputs}, {"causal": "true", **metadata})
        return path

    dump("layer0/step1.safetensors", {"recipe": "fa3-bf16"})
    write_safetensors(folder / "other.safetensors", {"x": ("F32", [2], gaussian(2, 9, 1.0))})
    return folder, dump


def test_a_dump_naming_its_recipe_passes(cli, dumps):
    folder, _ = dumps
    j = cli.json("check", folder)
    first = j["checks"][0]
    assert first["kind"] == "attention" and first["matched"] == first["total"] == H * N * (4 * D + 1), j
    assert j["skipped"] == [str(folder / "other.safetensors")], j


def test_a_dump_whose_kernel_ran_other_settings_fails(cli, dumps):
    folder, dump = dumps
    bad = dump("layer0/step2.safetensors",
               {"recipe": "fa3-bf16", "recipe_settings": json.dumps({"o_accumulator": "bf16"})})
    p = cli.run("check", folder, check=False)
    passed = f"PASS {folder / 'layer0/step1.safetensors'}"
    assert p.returncode == 1 and f"FAIL {bad}" in p.stdout and passed in p.stdout, \
        p.stdout + p.stderr


def test_unusable_input_stops_the_run_before_any_check(cli, dumps, tmp_path):
    folder, dump = dumps
    step3 = dump("layer0/step3.safetensors", {"recipe": "fa9-bf16"})
    message = cli.error("check", folder)
    assert "step3.safetensors" in message and "fa9-bf16" in message, message
    step3.unlink()
    (folder / "layer0" / "torn.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":")
    assert "torn.safetensors" in cli.error("check", folder)
    (folder / "layer0" / "torn.safetensors").unlink()
    assert "--junit" in cli.error("check", folder, "--junit", folder / "layer0" / "step1.safetensors")
    (tmp_path / "empty").mkdir()
    assert "no golden files" in cli.error("check", tmp_path / "empty")
    assert cli.error("check", tmp_path / "missing").endswith("missing: no such folder")
    assert cli.error("check", folder / "layer0" / "step1.safetensors").endswith("step1.safetensors: not a directory")


def test_the_junit_file_is_well_formed_whatever_the_file_names(cli, tmp_path):
    """A file name may hold control characters and bytes that are not UTF-8 (XML can hold
    neither): written as \\xNN, the XML parses; UTF-8 in a name stays as it is."""
    folder = tmp_path / "golden"
    shutil.copytree(GOLDEN, folder, ignore=WITHOUT_CONVERSIONS)
    odd = os.fsdecode(b"odd\x01\xff\xc3\xa9.safetensors")
    write_safetensors(folder / odd, {"x": ("F32", [1], b"\0\0\0\0")})  # a tensor file, not a golden one
    xml = tmp_path / "golden.xml"
    cli.run("check", folder, "--junit", xml)
    root, cases = junit(xml)
    names = [c for c, n in cases if n == "not a golden file"]
    assert any(c.endswith("odd\\x01\\xff\u00e9.safetensors") for c in names), names


def test_tolerances_let_a_dump_within_them_pass_and_name_what_fails(cli, dumps):
    folder, dump = dumps
    path = dump("layer0/step1.safetensors", {"recipe": "fa3-bf16"})
    tensors, metadata = read_safetensors(path)
    dtype, shape, raw = tensors["o"]
    one_ulp = bytearray(raw)
    one_ulp[2 * 7] ^= 1  # o[0, 0, 7], one ulp away
    write_safetensors(path, dict(tensors, o=(dtype, shape, bytes(one_ulp))), metadata)
    total = H * N * D

    def passed(*tolerance):
        p = cli.run("check", folder, *tolerance, "--json", check=False)
        return p.returncode == 0 and json.loads(p.stdout)["failed"] == 0

    assert not passed() and not passed("--max-ulp", "0") and not passed("--min-match", "1")
    assert passed("--max-ulp", "1") and passed("--max-row-ulp", "1") and passed("--min-match", str(1 - 1 / total))
    assert passed("--rtol", "0.01", "--atol", "0") and not passed("--rtol", "0", "--atol", "0")
    assert not passed("--max-ulp", "1", "--min-match", "1"), "every tolerance given must hold"
    detail = cli.json("check", folder, "--max-ulp", "0", check=False)["checks"][0]["detail"]
    assert detail.startswith(f"o: 1 of {total} differ") and "furthest at [0, 0, 7]" in detail, detail

    nan = bytearray(raw)
    nan[2 * 9: 2 * 9 + 2] = struct.pack("<H", 0x7FC0)  # o[0, 0, 9]
    write_safetensors(path, dict(tensors, o=(dtype, shape, bytes(nan))), metadata)
    assert not passed("--max-row-ulp", "1000") and not passed("--rtol", "1", "--atol", "1")
    assert passed("--min-match", "0.999"), "a share of bits is what min-match asks, NaN or not"
    detail = cli.json("check", folder, "--max-row-ulp", "1000", check=False)["checks"][0]["detail"]
    assert "1 NaN or Inf where the truth is finite (first at [0, 0, 9])" in detail, detail

    for bad in (["--min-match", "1.5"], ["--max-ulp", "-1"], ["--rtol", "0.1"], ["--max-row-ulp", "inf"]):
        assert bad[0] in cli.error("check", folder, *bad), bad
