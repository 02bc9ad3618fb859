"""The command-line contract of docs/cli.md for `formats` and `cast`: JSON keys, exact
values, one-line errors with exit code 2.

Usage: test_cli.py PATH/TO/roundscope
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cli_harness import check, finish, run as run_binary  # noqa: E402

BINARY = sys.argv[1]


def run(*args):
    return run_binary(BINARY, *args, timeout=60)


# formats --json: one object, every key of the contract, the published limits.
rc, out, err = run("formats", "--json")
doc = json.loads(out)
check("formats exit", rc == 0, err)
keys = {"name", "bits", "exp_bits", "man_bits", "bias", "max", "min_normal", "min_subnormal", "has_inf", "nan"}
by_name = {f["name"]: f for f in doc["formats"]}
check("formats keys", all(keys <= set(f) for f in doc["formats"]), doc["formats"][0])
check("formats list", set(by_name) >= {"f64", "f32", "f16", "bf16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0",
                                       "ue4m3", "int8"}, sorted(by_name))
expected_max = {"e4m3": 448, "e5m2": 57344, "e2m3": 7.5, "e3m2": 28, "e2m1": 6, "f16": 65504, "int8": 127 / 64}
for n, m in expected_max.items():
    check(f"max {n}", by_name[n]["max"] == m, by_name[n]["max"])
check("e4m3 min subnormal", by_name["e4m3"]["min_subnormal"] == 2 ** -9)
check("e8m0 min", by_name["e8m0"]["min_normal"] == 2 ** -127)
check("has_inf", by_name["e5m2"]["has_inf"] and not by_name["e4m3"]["has_inf"])

# cast --json: bits, values and errors, special values as strings.
rc, out, err = run("cast", "0.1", "448", "465", "nan", "--to", "e4m3", "--json")
doc = json.loads(out)
results = doc["results"]
check("cast exit", rc == 0, err)
check("cast keys", all({"input", "bits", "value", "abs_error", "rel_error"} <= set(r) for r in results), results)
check("cast 0.1", results[0]["bits"] == "0x1d" and results[0]["value"] == 0.1015625, results[0])
check("cast 0.1 error", math.isclose(results[0]["abs_error"], 0.0015625, rel_tol=1e-12), results[0])
check("cast 465 saturates (cuda)", results[2]["bits"] == "0x7e" and results[2]["value"] == 448, results[2])
check("cast nan", results[3]["bits"] == "0x7f" and results[3]["value"] == "nan", results[3])
rc, out, err = run("cast", "465", "--to", "e4m3", "--nosat", "--json")
check("nosat overflow is NaN", json.loads(out)["results"][0]["bits"] == "0x7f", out)
rc, out, err = run("cast", "0x1.8p-3", "--to", "bf16", "--round", "rtz", "--json")
check("hex-float input", json.loads(out)["results"][0]["value"] == 0.1875, out)
rc, out, err = run("cast", "0x7e", "--from", "e4m3", "--to", "f32", "--json")
check("raw bits input", json.loads(out)["results"][0]["bits"] == "0x43e00000", out)
rc, out, err = run("cast", "--to", "e5m2", "--nosat", "--json", "--", "-inf")
check("-inf after --", rc == 0 and json.loads(out)["results"][0]["value"] == "-inf", out + err)
# Decimal input is rounded once: 1 + 2^-24 + 10^-30 (just above a float32 tie) rounds up.
rc, out, err = run("cast", "1.00000005960464477539062500000000000001", "--to", "f32", "--json")
check("decimal rounded once", json.loads(out)["results"][0]["bits"] == "0x3f800001", out)
rc, out, err = run("cast", "1", "2", "3", "--to", "e2m1", "--round", "sr:4", "--seed", "9", "--json")
check("sr accepted", rc == 0 and json.loads(out)["round"] == "sr:4", out + err)

# Bad input: one line on stderr starting `roundscope: error:`, naming the culprit, exit 2.
for args, culprit in [
    (("cast", "1", "--to", "e4m4"), "e4m4"),
    (("cast", "1", "--to", "e4m3", "--round", "nearest"), "nearest"),
    (("cast", "1", "--to", "e4m3", "--round", "sr:24"), "sr:24"),
    (("cast", "1", "--to", "e4m3", "--round", "sr:0"), "sr:0"),
    (("cast", "abc", "--to", "e4m3"), "abc"),
    (("cast", "0x1ff", "--from", "e4m3", "--to", "f32"), "0x1ff"),
    (("cast", "1", "--to", "e4m3", "--convention", "numpy"), "numpy"),
    (("cast", "1", "--to", "e4m3", "--sat", "--nosat"), "nosat"),
    (("cast", "1"), "--to"),
    (("frobnicate",), "frobnicate"),
]:
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    check(f"error {args}", rc == 2 and len(lines) == 1 and lines[0].startswith("roundscope: error:") and
          culprit in lines[0] and out == "", f"rc={rc} stderr={err!r} stdout={out!r}")

finish("test_cli")
