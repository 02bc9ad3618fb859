"""`roundscope compare`: a dump whose kernel outputs are the recipe's own emulation matches bit for
bit and has the truth errors `attention --truth` reports; one flipped bit is found where it is
(one mismatch, 1 ulp); the ulp histogram counts every element; the JSON keeps docs/cli.md's
keys; bad dumps get one line and exit 2.

Usage: test_compare_cli.py ROUNDSCOPE"""
import json
import os
import random
import struct
import sys
import tempfile

from cli_harness import check, finish, one_line_error, read_safetensors, run, write_safetensors

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope_compare_")
H, N, D = 2, 80, 16


def path(name):
    return os.path.join(TMP, name)


def gaussian(count, seed, scale):
    r = random.Random(seed)
    return struct.pack(f"<{count}f", *(r.gauss(0, scale) for _ in range(count)))


inputs = {name: ("F32", [H, N, D], gaussian(H * N * D, seed, scale))
          for seed, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0), ("do", 1.0)])}
causal = {"causal": "true"}
write_safetensors(path("in.safetensors"), inputs, causal)
rc, out, err = run(BINARY, "attention", path("in.safetensors"), "--recipe", "fa2-bf16", "--backward", "--truth",
                   "--json", "-o", path("emu.safetensors"))
check("the recipe's emulation runs", rc == 0, err)
truth_errors = json.loads(out)["errors"] if rc == 0 else {}
emulated, _ = read_safetensors(path("emu.safetensors")) if rc == 0 else ({}, {})
KERNEL_OUTPUTS = ["o", "lse", "dq", "dk", "dv"]


def dump(name, outputs, metadata=causal, without=()):
    tensors = {k: v for k, v in inputs.items() if k not in without}
    tensors.update(outputs)
    write_safetensors(path(name), tensors, metadata)
    return path(name)


def compare(file, *extra):
    rc, out, err = run(BINARY, "compare", file, "--recipe", "fa2-bf16", "--json", *extra)
    return rc, (json.loads(out) if rc == 0 else None), err


# The recipe's own outputs as the kernel's: every bit matches; the truth side equals attention --truth.
rc, j, err = compare(dump("same.safetensors", {k: emulated[k] for k in KERNEL_OUTPUTS}))
check("compare runs", rc == 0, err)
if j:
    check("every output compared", sorted(j["outputs"]) == sorted(KERNEL_OUTPUTS), j["outputs"].keys())
    check("all bits match", j["matched"] == j["total"] == H * N * (4 * D + 1), (j["matched"], j["total"]))
    for name, o in j["outputs"].items():
        keys = {"max_abs", "rms", "rel_rms", "ulp_histogram", "worst", "matched", "total", "max_ulp"}
        check(f"{name}: the keys of docs/cli.md", keys <= set(o), o.keys())
        check(f"{name}: max_ulp 0 against the recipe", o["max_ulp"] == 0 and o["matched"] == o["total"], o)
        check(f"{name}: the histogram counts every element",
              sum(b["count"] for b in o["ulp_histogram"]) == o["total"], o["ulp_histogram"])
        check(f"{name}: truth errors as attention --truth",
              all(abs(o[k] - truth_errors[name][k]) <= 1e-15 * max(1, abs(o[k])) for k in ("max_abs", "rms", "rel_rms")),
              (o, truth_errors.get(name)))
        worst = o["worst"]
        check(f"{name}: worst elements by error, with positions", 0 < len(worst) <= 8 and
              all(len(w["index"]) == (3 if name != "lse" else 2) for w in worst) and
              all(abs(a["kernel"] - a["truth"]) >= abs(b["kernel"] - b["truth"]) for a, b in zip(worst, worst[1:])),
              worst)
        check(f"{name}: the worst error is max_abs", abs(abs(worst[0]["kernel"] - worst[0]["truth"]) - o["max_abs"]) <= 0,
              (worst[0], o["max_abs"]))

# One bit flipped in o at [1, 5, 7]: found there, and nowhere else.
dtype, shape, raw = emulated["o"]
flipped = bytearray(raw)
element = (1 * N + 5) * D + 7
flipped[2 * element] ^= 1
rc, j, err = compare(dump("flipped.safetensors", {"o": (dtype, shape, bytes(flipped))}))
check("compare with one flipped bit runs", rc == 0, err)
if j:
    o = j["outputs"]["o"]
    check("only o compared when only o is there", list(j["outputs"]) == ["o"], j["outputs"].keys())
    check("one mismatch, 1 ulp", o["matched"] == o["total"] - 1 == H * N * D - 1 and o["max_ulp"] == 1, o)

# The text report names every output and the totals.
rc, out, err = run(BINARY, "compare", path("same.safetensors"), "--recipe", "fa2-bf16")
check("text report", rc == 0 and all(f"\n{k} " in out for k in KERNEL_OUTPUTS) and
      f"{H * N * (4 * D + 1)} of {H * N * (4 * D + 1)} output bit patterns" in out, out + err)

# Bad dumps: one line, exit 2, naming what is wrong.
rc, _, err = compare(dump("nothing.safetensors", {}))
check("a dump without kernel outputs", one_line_error(rc, err, "nothing a kernel wrote"), err)
rc, _, err = compare(dump("no_do.safetensors", {"dq": emulated["dq"]}, without=("do",)))
check("gradients without do", one_line_error(rc, err, "'dq'", "'do'"), err)
rc, _, err = compare(dump("f32_o.safetensors", {"o": ("F32", [H, N, D], gaussian(H * N * D, 9, 1.0))}))
check("an o of another dtype than the recipe's", one_line_error(rc, err, "'o'", "bf16", "fa2-bf16"), err)
rc, _, err = compare(dump("short_o.safetensors", {"o": ("BF16", [H, N - 1, D], raw[: 2 * H * (N - 1) * D])}))
check("an o of the wrong shape", one_line_error(rc, err, "'o'", f"[{H}, {N}, {D}]"), err)
rc, _, err = run(BINARY, "compare", path("same.safetensors"), "--recipe", "fa9-bf16")
check("an unknown recipe", one_line_error(rc, err, "fa9-bf16"), err)
rc, _, err = run(BINARY, "compare", path("missing.safetensors"), "--recipe", "fa2-bf16")
check("a missing file", one_line_error(rc, err, "missing.safetensors"), err)

finish("test_compare_cli.py")
