"""`roundscope mma` and `roundscope probe` per docs/cli.md: --check on the H100 golden
vectors (exit 0, JSON keys), a flipped bit found and named (exit 1), -o writing D, --list, and
one-line errors with exit 2 for bad files; probe exits 3 without a GPU. Standard library only.

Usage: test_mma_cli.py ROUNDSCOPE GOLDEN_DIR"""
import json
import os
import struct
import sys
import tempfile

from cli_harness import check, finish, one_line_error, run

BINARY, GOLDEN = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="roundscope_mma_")


def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]])
               for k, v in header.items()}
    return tensors, meta


def write(path, tensors, meta=None):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


golden = os.path.join(GOLDEN, "mma_bf16.safetensors")
tensors, meta = read(golden)

rc, out, err = run(BINARY, "mma", golden, "--arch", "sm90", "--check", "--json")
j = json.loads(out) if rc == 0 else {}
check("--check on golden bf16 exits 0", rc == 0, err)
check("--check JSON keys", all(k in j for k in ("arch", "instruction", "matched", "total", "first_mismatches")), out)
check("--check matches all 327680", j.get("matched") == j.get("total") == 327680, out)

# One flipped bit of D in tile 3, row 2, column 5: exit 1, named in first_mismatches.
dtype, shape, raw = tensors["D"]
at = ((3 * 16 + 2) * 8 + 5) * 4
flipped = bytearray(raw)
flipped[at] ^= 1
bad = os.path.join(TMP, "flipped.safetensors")
write(bad, {**tensors, "D": (dtype, shape, bytes(flipped))}, meta)
rc, out, err = run(BINARY, "mma", bad, "--arch", "sm90", "--check", "--json")
j = json.loads(out) if out else {}
check("one flipped bit exits 1", rc == 1, f"rc {rc} {err}")
check("one flipped bit: matched = total - 1", j.get("matched") == 327679, out)
first = (j.get("first_mismatches") or [{}])[0]
check("the mismatch is located", (first.get("tile"), first.get("row"), first.get("col")) == (3, 2, 5), out)

# -o writes D, bit for bit the golden D.
d_out = os.path.join(TMP, "d.safetensors")
rc, out, err = run(BINARY, "mma", golden, "--arch", "sm90", "-o", d_out)
written, _ = read(d_out) if rc == 0 else ({}, {})
check("-o writes D equal to the GPU's", rc == 0 and written.get("D") == tensors["D"], err)

# wgmma's FP8 model differs from mma.sync's on the same tiles.
rc, out, err = run(BINARY, "mma", os.path.join(GOLDEN, "mma_e4m3.safetensors"), "--instruction", "wgmma", "--check")
check("the wgmma FP8 model does not fit mma.sync tiles", rc == 1, f"rc {rc}")

rc, out, err = run(BINARY, "mma", "--list", "--json")
models = json.loads(out)["models"] if rc == 0 else []
check("--list names sm80, sm89, sm90 and sm100 models",
      {m["arch"] for m in models} >= {"sm80", "sm89", "sm90", "sm100"}, out[:200])

# Bad input: one line, exit 2, naming what is wrong.
no_c = os.path.join(TMP, "no_b.safetensors")
write(no_c, {k: v for k, v in tensors.items() if k != "B"}, meta)
rc, out, err = run(BINARY, "mma", no_c, "--arch", "sm90")
check("missing B", one_line_error(rc, err, "no_b.safetensors", "'B'"), err)
wrong = os.path.join(TMP, "wrong_shape.safetensors")
dtype, shape, raw = tensors["C"]
write(wrong, {**tensors, "C": (dtype, [shape[0], 8, 16], raw)}, meta)
rc, out, err = run(BINARY, "mma", wrong, "--arch", "sm90")
check("wrong C shape", one_line_error(rc, err, "'C'", "[2560, 8, 16]"), err)
ints = os.path.join(TMP, "int_a.safetensors")
dtype, shape, raw = tensors["A"]
write(ints, {**tensors, "A": ("I16", shape, raw)}, meta)
rc, out, err = run(BINARY, "mma", ints, "--arch", "sm90")
check("integer A", one_line_error(rc, err, "'A'", "not a floating format"), err)
rc, out, err = run(BINARY, "mma", golden, "--arch", "sm75")
check("unknown arch", one_line_error(rc, err, "--arch", "sm75"), err)
rc, out, err = run(BINARY, "mma", os.path.join(GOLDEN, "mma_e4m3.safetensors"), "--arch", "sm80")
check("no model for the dtypes", one_line_error(rc, err, "sm80", "e4m3"), err)
truncated = os.path.join(TMP, "truncated.safetensors")
open(truncated, "wb").write(open(golden, "rb").read()[:100000])
rc, out, err = run(BINARY, "mma", truncated, "--arch", "sm90", "--check")
check("truncated file", one_line_error(rc, err, "truncated.safetensors"), err)
no_d = os.path.join(TMP, "no_d.safetensors")
write(no_d, {k: v for k, v in tensors.items() if k != "D"}, meta)
rc, out, err = run(BINARY, "mma", no_d, "--arch", "sm90", "--check")
check("--check without D", one_line_error(rc, err, "'D'"), err)

rc, out, err = run(BINARY, "probe", "--out", os.path.join(TMP, "probe"))
check("probe without a GPU exits 3", rc == 3 or (rc == 0 and os.path.exists(os.path.join(TMP, "probe", "mma_bf16.safetensors"))),
      f"rc {rc} {err}")

finish("test_mma_cli")
