"""`roundscope report`: four dumps (2 layers x 2 steps, 2 heads, causal, a sink) analysed head by
head; each head's P-collapse equals `roundscope pcollapse` on the file; the bias is summed over
steps per layer and head; a re-run takes everything from the cache and writes the same report;
1 and 2 threads give the same results; a changed file is recomputed alone; --list-tasks and
--run-task give what the cache holds; the HTML is self-contained and renders in headless
Chromium (tools/setup.sh installs it) to a screenshot with content; bad input gets one line and
exit 2 before anything is written.

Usage: test_report_cli.py ROUNDSCOPE [SCREENSHOT.png]"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

from cli_harness import check, finish, one_line_error, run, write_safetensors

BINARY = sys.argv[1]
SCREENSHOT = sys.argv[2] if len(sys.argv) > 2 else None
TMP = tempfile.mkdtemp(prefix="roundscope_report_")
DUMPS = os.path.join(TMP, "dumps")
os.makedirs(DUMPS)
H, N, D = 2, 64, 16


def tensors(seed):
    r = random.Random(seed)
    q = [r.gauss(0, 1) for _ in range(H * N * D)]
    k = [r.gauss(0, 1) for _ in range(H * N * D)]
    for h in range(H):  # key 0 is a sink: feature 0 is 3 in every query and 8 in key 0
        for i in range(N):
            q[(h * N + i) * D] = 3.0
            k[(h * N + i) * D] = 8.0 if i == 0 else 0.0
    pack = lambda xs: struct.pack(f"<{len(xs)}f", *xs)
    return {"q": ("F32", [H, N, D], pack(q)), "k": ("F32", [H, N, D], pack(k)),
            "v": ("F32", [H, N, D], pack([r.gauss(-0.3, 1) for _ in range(H * N * D)])),
            "do": ("F32", [H, N, D], pack([r.gauss(-0.3, 1) for _ in range(H * N * D)]))}


def make_dump(layer, step):
    """Inputs plus o as a BF16 kernel would write it (the fa2-bf16 emulation)."""
    raw = os.path.join(TMP, f"raw{layer}{step}.safetensors")
    write_safetensors(raw, tensors(10 * layer + step), {"causal": "true"})
    out = os.path.join(TMP, f"o{layer}{step}.safetensors")
    rc, _, err = run(BINARY, "attention", raw, "--recipe", "fa2-bf16", "-o", out)
    assert rc == 0, err
    o = open(out, "rb").read()
    n = struct.unpack("<Q", o[:8])[0]
    header = json.loads(o[8 : 8 + n])
    start, end = header["o"]["data_offsets"]
    t = tensors(10 * layer + step)
    t["o"] = ("BF16", [H, N, D], o[8 + n + start : 8 + n + end])
    path = os.path.join(DUMPS, f"step{step}_layer{layer}.safetensors")
    write_safetensors(path, t, {"causal": "true", "layer": str(layer), "step": str(step)})
    return path


files = [make_dump(layer, step) for layer in (0, 1) for step in (0, 10)]


def report(out, *extra):
    rc, stdout, err = run(BINARY, "report", DUMPS, "-o", out, "--recipe", "fa2-bf16", "--json", *extra)
    return rc, (json.loads(stdout) if rc == 0 else None), err


def load(out):
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)


OUT = os.path.join(TMP, "report")
rc, summary, err = report(OUT, "--threads", "2")
check("report runs", rc == 0 and summary["tasks"] == 4 * H + 4 and summary["cached"] == 0, err)
check("no progress bar when standard error is not a terminal", err == "", err)
r = load(OUT) if rc == 0 else {"heads": [], "compare": [], "bias_over_steps": [], "files": []}
check("every file and head", len(r["files"]) == 4 and len(r["heads"]) == 4 * H and len(r["compare"]) == 4,
      [len(r[k]) for k in ("files", "heads", "compare")])

# Each head's P-collapse is pcollapse's on the whole file, head for head.
for f in files:
    rc, out, err = run(BINARY, "pcollapse", f, "--recipe", "fa3-fp8", "--k-sink", "1", "--json")
    whole = json.loads(out) if rc == 0 else {"heads": []}
    name = os.path.basename(f)
    for h in whole["heads"]:
        mine = [x for x in r["heads"] if x["file"] == name and x["head"] == h["head"]]
        ok = len(mine) == 1 and all(
            a["underflow_fraction"] == b["underflow_fraction"] and a["predicted_fraction"] == b["predicted_fraction"]
            for a, b in zip(mine[0]["pcollapse"]["runs"], h["runs"]))
        ok = ok and mine[0]["pcollapse"]["effective_sink_strength"] == h["effective_sink_strength"]
        check(f"{name} head {h['head']}: P-collapse as pcollapse gives it", ok, mine)
sinks = [x["pcollapse"]["sink_mass"] for x in r["heads"]]
check("the sink is seen (mass on key 0 above 0.2 in every head)", all(m > 0.2 for m in sinks), sinks)
check("every head has leakage, headroom, bias and attribution",
      all({"leak", "headroom", "bias", "attribute"} <= set(x) for x in r["heads"]), [sorted(x) for x in r["heads"]])
check("the kernel's o matches the fa2-bf16 emulation bit for bit",
      all(c["compare"]["fa2-bf16"]["outputs"]["o"]["matched"] == H * N * D for c in r["compare"]), r["compare"][:1])

# The dumps' o is fa2-bf16's own: the kernel's delta error is the emulation's; the max
# adjustment is a different kernel, emulated (the dump's O is not the fixed kernel's).
for x in r["heads"]:
    b = x["bias"]
    check(f"{x['file']} head {x['head']}: stored o = emulated o, and the fix is emulated",
          b["kernel"]["coefficient_sum"] == b["emulated"]["coefficient_sum"] and b["kernel"]["o_from_file"]
          and not b["emulated"]["o_from_file"] and not b["max_adjust"]["o_from_file"], b)

# The bias over steps: per layer and head, steps in order, running sums.
series = r["bias_over_steps"]
check("bias series per layer and head", sorted((s["layer"], s["head"]) for s in series) == [(l, h) for l in (0, 1) for h in range(H)], series)
for s in series:
    by_step = {x["step"]: x["bias"]["kernel"]["coefficient_sum"] for x in r["heads"] if x["layer"] == s["layer"] and x["head"] == s["head"]}
    check(f"layer {s['layer']} head {s['head']}: cumulative sum of the steps' coefficients",
          s["steps"] == [0, 10] and s["coefficient_sum"] == [by_step[0], by_step[10]]
          and s["cumulative"] == [by_step[0], by_step[0] + by_step[10]], s)
    pos, neg = sum(c > 0 for c in s["coefficient_sum"]), sum(c < 0 for c in s["coefficient_sum"])
    # two steps: one sign both times gives p = 1/2, split signs p = 1 (the exact two-sided sign test)
    want_p = 1.0 if pos + neg == 0 or min(pos, neg) == 1 else 2 * 0.5 ** (pos + neg)
    check(f"layer {s['layer']} head {s['head']}: signs across steps and their sign test",
          s["positive_steps"] == pos and s["negative_steps"] == neg and abs(s["sign_test_p"] - min(1.0, want_p)) < 1e-12, s)

# On a terminal: a progress bar on standard error, ending at every task.
import pty  # noqa: E402
master, slave = pty.openpty()
p = subprocess.run([BINARY, "report", DUMPS, "-o", os.path.join(TMP, "report_tty"), "--recipe", "fa2-bf16"],
                   stdout=subprocess.DEVNULL, stderr=slave, timeout=600)
os.close(slave)
seen = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
os.close(master)
check("a progress bar on a terminal", p.returncode == 0 and b"\r[" in seen and f"{4 * H + 4}/{4 * H + 4} tasks".encode() in seen, seen[-300:])

# The cache: a re-run computes nothing and writes the same results.
rc, again, err = report(OUT)
check("a re-run takes every task from the cache", rc == 0 and again["cached"] == again["tasks"], again)
r2 = load(OUT)
check("... and writes the same report", all(r2[k] == r[k] for k in ("files", "heads", "compare", "bias_over_steps")))
OUT1 = os.path.join(TMP, "report1")
rc, _, err = report(OUT1, "--threads", "1")
check("1 thread gives the bits of 2", rc == 0 and all(load(OUT1)[k] == r[k] for k in ("heads", "compare", "bias_over_steps")), err)

# A changed file: only its tasks run again.
changed = tensors(99)
changed["o"] = ("BF16", [H, N, D], b"\0\0" * (H * N * D))
write_safetensors(files[0], changed, {"causal": "true", "layer": "0", "step": "0"})
rc, third, err = report(OUT)
check("a changed file is recomputed alone", rc == 0 and third["cached"] == third["tasks"] - (H + 1), third)
r3 = load(OUT) if rc == 0 else {"compare": [{}]}
check("... and its o of zeros no longer matches",
      r3["compare"][0].get("compare", {}).get("fa2-bf16", {}).get("matched", -1) < H * N * D, r3["compare"][:1])

# The tasks for a distributed engine.
rc, out, err = run(BINARY, "report", DUMPS, "-o", OUT, "--recipe", "fa2-bf16", "--list-tasks", "--json")
tasks = json.loads(out)["tasks"] if rc == 0 else []
check("--list-tasks lists every task", len(tasks) == 4 * H + 4, out)
if tasks:
    rc, out, err = run(BINARY, "report", DUMPS, "-o", OUT, "--recipe", "fa2-bf16", "--run-task", tasks[1]["key"], "--json")
    with open(os.path.join(OUT, "cache", tasks[1]["key"] + ".json")) as f:
        check("--run-task prints what the cache holds", rc == 0 and json.loads(out) == json.load(f), err)

# The page: self-contained, with its plots, and it renders.
html = open(os.path.join(OUT, "report.html")).read()
check("report.html has inline SVG plots and tables", html.count("<svg") >= 6 and "<table" in html, html[:200])
check("report.html loads nothing from elsewhere",
      "<script" not in html and "<link" not in html and "src=" not in html
      and html.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0)
browser = shutil.which("chromium") or shutil.which("chromium-browser")
check("headless Chromium is installed (tools/setup.sh)", browser is not None)
if browser:
    png = SCREENSHOT or os.path.join(TMP, "report.png")
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={png}", "--window-size=1280,1800", "file://" + os.path.join(OUT, "report.html")],
                       capture_output=True, text=True, timeout=120)
    data = open(png, "rb").read() if os.path.exists(png) else b""
    check("Chromium renders a screenshot", p.returncode == 0 and data[:8] == b"\x89PNG\r\n\x1a\n", p.stderr[-500:])
    # A blank page compresses to a few kilobytes; plots and tables do not.
    check("... with content on it", len(data) > 60000, len(data))

# Bad input: one line, exit 2, nothing written.
BAD = os.path.join(TMP, "bad")
os.makedirs(BAD)
shutil.copy(files[1], BAD)
with open(os.path.join(BAD, "zcorrupt.safetensors"), "wb") as f:
    f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
rc, out, err = run(BINARY, "report", BAD, "-o", os.path.join(TMP, "bad_report"))
check("a corrupt dump: one line naming it, exit 2", one_line_error(rc, err, "zcorrupt.safetensors"), err)
check("... before any work (no report folder)", not os.path.exists(os.path.join(TMP, "bad_report")))
rc, out, err = run(BINARY, "report", DUMPS, "-o", files[1])
check("-o onto a dump: exit 2", one_line_error(rc, err, "-o"), err)
rc, out, err = run(BINARY, "report", DUMPS, "-o", DUMPS)
check("-o the dumps' own folder: exit 2", one_line_error(rc, err, "-o"), err)
rc, out, err = run(BINARY, "report", DUMPS, "--recipe", "no-such-recipe", "-o", os.path.join(TMP, "x"))
check("an unknown recipe: exit 2", one_line_error(rc, err, "no-such-recipe"), err)
EMPTY = os.path.join(TMP, "empty")
os.makedirs(EMPTY)
rc, out, err = run(BINARY, "report", EMPTY, "-o", os.path.join(TMP, "y"))
check("no dumps: exit 2", one_line_error(rc, err, "no .safetensors"), err)
rc, out, err = run(BINARY, "report", DUMPS, "-o", OUT, "--run-task", "nonsense")
check("an unknown task: exit 2", one_line_error(rc, err, "nonsense"), err)
finish("test_report_cli")
