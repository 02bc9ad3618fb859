"""What every CLI test script shares: running the binary and counting checks.

A script calls check(name, condition, detail) for each property and finish() at the end,
which prints the failures and exits 1 if there were any."""
import json
import struct
import subprocess
import sys

failures = []
passed = 0


def run(binary, *args, timeout=600):
    p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(name, condition, detail=""):
    global passed
    if condition:
        passed += 1
    else:
        failures.append(f"{name}: {detail}")


def one_line_error(rc, err, *phrases):
    """Exit code 2 and one line `roundscope: error: ...` holding every phrase."""
    return rc == 2 and err.count("\n") == 1 and err.startswith("roundscope: error: ") and all(p in err for p in phrases)


def finish(script):
    for f in failures:
        print("FAIL", f)
    print(f"{script}: {passed} checks passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def write_safetensors(path, tensors, metadata=None):
    """{name: (dtype, shape, raw bytes)} written by hand (an 8-byte header length, the JSON
    header, the data), so that the suite needs nothing but Python."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_safetensors(path):
    """An independent reader: {name: (dtype, shape, raw bytes)} and the metadata."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]])
               for k, v in header.items() if k != "__metadata__"}
    return tensors, header.get("__metadata__", {})
