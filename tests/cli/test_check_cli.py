"""`roundscope check DIR`: the repository's H100 golden files pass; one flipped bit in a copy
fails that file alone (exit 1, JUnit failure); attention dumps naming a recipe pass when their
outputs are the recipe's and fail when the recipe's settings differ; unusable input stops the
run with one line and exit 2 before any check.

Usage: test_check_cli.py ROUNDSCOPE GOLDEN_DIR"""
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import xml.etree.ElementTree as ET

from cli_harness import check, finish, one_line_error, read_safetensors, run, write_safetensors

BINARY, GOLDEN = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="roundscope_check_")


def junit(path):
    root = ET.parse(path).getroot()
    return root, {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


# The repository's golden files, as CI checks them.
xml = os.path.join(TMP, "golden.xml")
rc, out, err = run(BINARY, "check", GOLDEN, "--junit", xml)
check("the golden files pass", rc == 0 and out.count("PASS ") == 4 and "4 of 4 checks passed" in out, out + err)
if rc == 0:
    root, cases = junit(xml)
    check("JUnit: 4 tests, no failure", root.get("tests") == "4" and root.get("failures") == "0" and len(cases) == 4,
          ET.tostring(root)[:300])

# A copy with one bit of D flipped in one tile of one file: that file fails, the others pass.
flipped_dir = os.path.join(TMP, "flipped")
shutil.copytree(GOLDEN, flipped_dir)
target = os.path.join(flipped_dir, "mma_e4m3.safetensors")
tensors, metadata = read_safetensors(target)
dtype, shape, raw = tensors["D"]
raw = bytearray(raw)
raw[4 * 1000] ^= 1  # element 1000 = tile 7, element 104
tensors["D"] = (dtype, shape, bytes(raw))
write_safetensors(target, tensors, metadata)
rc, out, err = run(BINARY, "check", flipped_dir, "--json", "--junit", xml)
check("one flipped bit: exit 1", rc == 1, out + err)
if out:
    j = json.loads(out)
    failed = [c for c in j["checks"] if not c["passed"]]
    check("one flipped bit: that file alone fails, by one element", j["failed"] == 1 and len(failed) == 1 and
          failed[0]["file"] == target and failed[0]["matched"] == failed[0]["total"] - 1 and
          "tile 7 at element 104" in failed[0]["detail"], failed)
    root, cases = junit(xml)
    failures = [c for c in cases.values() if c.find("failure") is not None]
    check("JUnit: one failure, on that file", root.get("failures") == "1" and len(failures) == 1 and
          failures[0].get("classname") == target and "1 of 327680 differ" in failures[0].find("failure").get("message"),
          ET.tostring(root)[:400])


# Attention dumps naming a recipe: the recipe's own outputs pass; other settings fail.
def gaussian(count, seed, scale):
    r = random.Random(seed)
    return struct.pack(f"<{count}f", *(r.gauss(0, scale) for _ in range(count)))


H, N, D = 2, 48, 16
dumps = os.path.join(TMP, "dumps")
os.makedirs(os.path.join(dumps, "layer0"))
inputs = {name: ("F32", [H, N, D], gaussian(H * N * D, seed, scale))
          for seed, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0), ("do", 1.0)])}
write_safetensors(os.path.join(TMP, "in.safetensors"), inputs, {"causal": "true"})
rc, _, err = run(BINARY, "attention", os.path.join(TMP, "in.safetensors"), "--recipe", "fa3-bf16", "--backward",
                 "-o", os.path.join(TMP, "emu.safetensors"))
check("the recipe's outputs", rc == 0, err)
emulated, _ = read_safetensors(os.path.join(TMP, "emu.safetensors")) if rc == 0 else ({}, {})
outputs = {k: emulated[k] for k in ("o", "lse", "dq", "dk", "dv") if k in emulated}


def dump(name, metadata):
    path = os.path.join(dumps, name)
    write_safetensors(path, {**inputs, **outputs}, {"causal": "true", **metadata})
    return path


good = dump("layer0/step1.safetensors", {"recipe": "fa3-bf16"})
# not golden: skipped, not an error
write_safetensors(os.path.join(dumps, "other.safetensors"), {"x": ("F32", [2], gaussian(2, 9, 1.0))})
rc, out, err = run(BINARY, "check", dumps, "--json")
check("a dump naming its recipe passes", rc == 0, out + err)
if rc == 0:
    j = json.loads(out)
    check("dump: every output bit compared", j["checks"][0]["kind"] == "attention" and
          j["checks"][0]["matched"] == j["checks"][0]["total"] == H * N * (4 * D + 1), j)
    check("a file that is not golden is skipped", j["skipped"] == [os.path.join(dumps, "other.safetensors")], j)
bad = dump("layer0/step2.safetensors", {"recipe": "fa3-bf16", "recipe_settings": json.dumps({"o_accumulator": "bf16"})})
rc, out, err = run(BINARY, "check", dumps)
check("a dump whose kernel ran other settings fails", rc == 1 and f"FAIL {bad}" in out and f"PASS {good}" in out,
      out + err)

# Unusable input: one line, exit 2, nothing checked.
os.remove(bad)
dump("layer0/step3.safetensors", {"recipe": "fa9-bf16"})
rc, out, err = run(BINARY, "check", dumps)
check("an unknown recipe in a dump", one_line_error(rc, err, "step3.safetensors", "fa9-bf16") and out == "", out + err)
os.remove(os.path.join(dumps, "layer0", "step3.safetensors"))
with open(os.path.join(dumps, "layer0", "torn.safetensors"), "wb") as f:
    f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":")
rc, out, err = run(BINARY, "check", dumps)
check("a corrupt file", one_line_error(rc, err, "torn.safetensors") and out == "", out + err)
os.remove(os.path.join(dumps, "layer0", "torn.safetensors"))
rc, out, err = run(BINARY, "check", dumps, "--junit", good)
check("--junit onto a golden file", one_line_error(rc, err, "--junit") and out == "", out + err)
empty = os.path.join(TMP, "empty")
os.makedirs(empty)
rc, out, err = run(BINARY, "check", empty)
check("a folder without golden files", one_line_error(rc, err, "no golden files"), out + err)
rc, out, err = run(BINARY, "check", os.path.join(TMP, "missing"))
check("a folder that is not there", one_line_error(rc, err, "not a directory"), out + err)

finish("test_check_cli.py")
