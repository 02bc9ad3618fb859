"""The real run's short version, as CI runs it: examples/train_real.py for 6 steps (2 layers,
context 128, dumps at steps 0 and 5), then `roundscope report` over its dumps. Checks what the run logs
(the corpus, the loss, the attention on the first token per layer and head at each dump) and
that the report covers every layer, head and step, with P-collapse's prediction within 0.01 of
the measurement on every head and the kernel's o compared with fa2-bf16.

Usage: test_real_run.py PYTHON ROUNDSCOPE OUT"""
import json
import os
import shutil
import subprocess
import sys
import time

from cli_harness import check, finish, run

PYTHON, BINARY, OUT = sys.argv[1:4]
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "train_real.py")
shutil.rmtree(OUT, ignore_errors=True)
p = subprocess.run([PYTHON, EXAMPLE, "--out", OUT, "--steps", "6", "--dump-every", "5", "--layers", "2",
                    "--context", "128"],
                   capture_output=True, text=True, timeout=600)
check("the example trains and dumps", p.returncode == 0, p.stderr[-2000:])
log = json.load(open(os.path.join(OUT, "sinks.json"))) if p.returncode == 0 else {"steps": [], "dumps": [], "corpus": {}}
check("the corpus is the standard library's sources", log["corpus"].get("files", 0) > 100
      and log["corpus"].get("bytes", 0) > 5e6, log["corpus"])
check("a loss per step, falling", len(log["steps"]) == 6 and log["steps"][-1] < log["steps"][0], log["steps"])
check("the sink's share at each dump, per layer and head",
      [d["step"] for d in log["dumps"]] == [0, 5]
      and all(len(d["sink_mass"]) == 2 and all(len(l) == 4 and all(0 <= m <= 1 for m in l) for l in d["sink_mass"])
              for d in log["dumps"]), log["dumps"])

rc, out, err = run(BINARY, "report", OUT, "-o", os.path.join(OUT, "report"), "--recipe", "fa2-bf16", "--json")
check("report runs on the dumps", rc == 0, err)
r = json.load(open(os.path.join(OUT, "report", "report.json"))) if rc == 0 else {"files": [], "heads": [], "compare": [], "bias_over_steps": []}
check("every layer and step", sorted((f["layer"], f["step"]) for f in r["files"]) == [(l, s) for l in (0, 1) for s in (0, 5)],
      r["files"])
check("every head: 4 per file", len(r["heads"]) == 16, len(r["heads"]))
check("the dumps carry x and wq (the dW^Q part)", all(f["has_x"] for f in r["files"]), r["files"][:1])
for h in r["heads"]:
    runs = h["pcollapse"]["runs"]
    check(f"{h['file']} head {h['head']}: P-collapse predicted within 0.01",
          all(abs(x["underflow_fraction"] - x["predicted_fraction"]) <= 0.01 for x in runs), runs)
check("the kernel's o, dq, dk, dv compared with fa2-bf16 in every file",
      len(r["compare"]) == 4 and all(set(c["compare"]["fa2-bf16"]["outputs"]) == {"o", "dq", "dk", "dv"} for c in r["compare"]),
      r["compare"][:1])
check("the delta error over the 2 steps, per layer and head",
      len(r["bias_over_steps"]) == 8 and all(s["steps"] == [0, 5] for s in r["bias_over_steps"]), r["bias_over_steps"][:1])
for args, phrase in ((["--context", "0"], "--context"), (["--context", "-5"], "--context"), (["--steps", "0"], "--steps"),
                     (["--lr", "nan"], "--lr"), (["--lr", "0"], "--lr"), (["--heads", "3"], "--heads"),
                     (["--d-model", "-1"], "--d-model"), (["--weight-decay", "inf"], "--weight-decay"),
                     (["--weight-decay", "-0.1"], "--weight-decay")):
    p = subprocess.run([PYTHON, EXAMPLE, "--out", os.path.join(OUT, "bad"), *args], capture_output=True, text=True, timeout=120)
    check(f"train_real.py {' '.join(args)}: exit 2 naming the option", p.returncode == 2 and phrase in p.stderr, p.stderr[-300:])

# A run stopped after a dump and resumed with --resume gives the bits of one that was never stopped.
small = ["--steps", "40", "--dump-every", "4", "--layers", "2", "--context", "64", "--d-model", "64", "--threads", "1"]
whole, stopped = os.path.join(OUT, "whole"), os.path.join(OUT, "stopped")
p = subprocess.run([PYTHON, EXAMPLE, "--out", whole, *small], capture_output=True, text=True, timeout=600)
check("the 40-step run trains", p.returncode == 0, p.stderr[-500:])
first = subprocess.Popen([PYTHON, EXAMPLE, "--out", stopped, *small], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.time() + 300
while time.time() < deadline and first.poll() is None:  # stop it once its checkpoint of step 4 or later is written
    if os.path.exists(os.path.join(stopped, "checkpoint.pt")) and len(json.load(open(os.path.join(stopped, "sinks.json")))["dumps"]) >= 2:
        break
    time.sleep(0.02)
first.kill()
first.wait()
p = subprocess.run([PYTHON, EXAMPLE, "--out", stopped, *small, "--resume"], capture_output=True, text=True, timeout=600)
resumed_at = [int(line.split()[3]) for line in p.stdout.splitlines() if line.startswith("resumed at step")]
check("--resume goes on from a step after the first and before the end",
      p.returncode == 0 and resumed_at and 4 <= resumed_at[0] < 39, p.stdout[-500:] + p.stderr[-500:])
logs = [json.load(open(os.path.join(d, "sinks.json"))) for d in (whole, stopped)] if p.returncode == 0 else [{}, {"x": 1}]
check("the resumed run's losses and sink masses equal the whole run's", all(logs[0].get(k) == logs[1].get(k) for k in ("steps", "dumps")),
      [len(l.get("steps", [])) for l in logs])
last = [open(os.path.join(d, "step39_layer1.safetensors"), "rb").read() if os.path.exists(os.path.join(d, "step39_layer1.safetensors")) else d
        for d in (whole, stopped)]
check("the resumed run's last dump equals the whole run's bit for bit", last[0] == last[1])
for args, phrase in (([], "no checkpoint"), (["--lr", "1e-3"], "--lr 0.002")):
    p = subprocess.run([PYTHON, EXAMPLE, *small, "--resume", *args, "--out", os.path.join(OUT, "bad" if not args else "stopped")],
                       capture_output=True, text=True, timeout=120)
    check(f"--resume {' '.join(args)}: exit 2 saying why", p.returncode == 2 and phrase in p.stderr, p.stderr[-300:])
finish("test_real_run")
