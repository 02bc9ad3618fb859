"""The BF16-bias training run's short version, as CI runs it: examples/train_bias.py's three runs
(no fix, max adjustment, delta from a float32 O) for 11 steps with dumps at steps 0, 5 and 10,
then examples/bias_verdict.py over them. Checks that the runs log and dump what the verdict
reads, that the released attention's o in the dumps is fa2-bf16-torch's bit for bit (and with
the max adjustment, fa2-bf16-torch with max_adjust=on), that the verdict covers every run,
layer and head, that delta from a float32 O leaves a coefficient orders of magnitude below the
unfixed one, and that bad options are refused with exit 2.

Usage: test_bias_run.py PYTHON ROUNDSCOPE OUT"""
import json
import os
import shutil
import subprocess
import sys

from cli_harness import check, finish, run

PYTHON, BINARY, OUT = sys.argv[1:4]
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
TRAIN, VERDICT = os.path.join(EXAMPLES, "train_bias.py"), os.path.join(EXAMPLES, "bias_verdict.py")
shutil.rmtree(OUT, ignore_errors=True)
FIXES = ("none", "max-adjust", "f32-delta")
for fix in FIXES:
    p = subprocess.run([PYTHON, TRAIN, "--fix", fix, "--out", os.path.join(OUT, fix), "--steps", "11", "--dump-every", "5",
                        "--context", "64", "--threads", "1"], capture_output=True, text=True, timeout=600)
    check(f"{fix}: trains and dumps", p.returncode == 0, p.stderr[-2000:])
    log = json.load(open(os.path.join(OUT, fix, "log.json"))) if p.returncode == 0 else {"steps": [], "dumps": []}
    check(f"{fix}: a loss per step and the max logit per dump and layer", len(log["steps"]) == 11
          and [d["step"] for d in log["dumps"]] == [0, 5, 10] and all(len(d["max_logit"]) == 2 for d in log["dumps"]),
          log.get("dumps"))
    if fix != "f32-delta":
        settings = ["--set", "max_adjust=on"] if fix == "max-adjust" else []
        rc, out, err = run(BINARY, "compare", os.path.join(OUT, fix, "step10_layer1.safetensors"), "--recipe",
                           "fa2-bf16-torch", *settings, "--json")
        o = json.loads(out)["outputs"]["o"] if rc == 0 else {"matched": 0, "total": 1}
        check(f"{fix}: the dumped o is fa2-bf16-torch's bit for bit", o["matched"] == o["total"], err or o)

p = subprocess.run([PYTHON, VERDICT, OUT, "--roundscope", BINARY, "--json", os.path.join(OUT, "verdict.json")],
                   capture_output=True, text=True, timeout=600)
check("the verdict runs", p.returncode == 0 and "verdict:" in p.stdout, p.stderr[-2000:])
v = json.load(open(os.path.join(OUT, "verdict.json"))) if p.returncode == 0 else {"rows": [], "verdict": ""}
keys = sorted((r["run"], r["layer"], r["head"]) for r in v["rows"])
check("every run, layer and head", keys == sorted((f, l, h) for f in FIXES for l in (0, 1) for h in (0, 1)), keys)
check("three dumps each", all(r["dumps"] == 3 and r["positive"] + r["negative"] <= 3 for r in v["rows"]), v["rows"][:2])
largest = {f: max((abs(r["cumulative"]) for r in v["rows"] if r["run"] == f), default=0) for f in FIXES}
check("delta from a float32 O: far below the unfixed coefficient", largest["f32-delta"] < 1e-2 * largest["none"], largest)
check("a verdict", v["verdict"].split(":")[0] in ("confirmed in", "refuted", "undecided") or
      v["verdict"].startswith("confirmed"), v["verdict"])

for args, phrase in ((["--fix", "bogus"], "--fix"), (["--heads", "3"], "--heads"), (["--lr", "nan"], "--lr"),
                     (["--context", "0"], "--context")):
    p = subprocess.run([PYTHON, TRAIN, "--out", os.path.join(OUT, "bad"), *args], capture_output=True, text=True, timeout=120)
    check(f"train_bias.py {' '.join(args)}: exit 2 naming the option", p.returncode == 2 and phrase in p.stderr, p.stderr[-300:])
p = subprocess.run([PYTHON, VERDICT, os.path.join(OUT, "nowhere")], capture_output=True, text=True, timeout=120)
check("bias_verdict.py without runs: an error naming the folder", p.returncode != 0 and "nowhere" in p.stderr, p.stderr)
finish("test_bias_run")
