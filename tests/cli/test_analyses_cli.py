"""The analysis commands keep docs/cli.md's JSON contract, refuse bad input with one line and
exit 2, and `roundscope demo` (the README's first command) runs the whole report in time and
writes its JSON (and its plots where matplotlib is installed).

Usage: test_analyses_cli.py ROUNDSCOPE"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

from cli_harness import check, finish, one_line_error, run

BINARY = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="roundscope_analyses_")

rc, out, err = run(BINARY, "pcollapse", "--synthetic", "--n", "256", "--json")
check("pcollapse runs", rc == 0, err)
if rc == 0:
    runs = json.loads(out)["runs"]
    check("pcollapse: both orders, S = 1 and 256", {(r["order"], r["scale"]) for r in runs} == {("forward", 1), ("forward", 256), ("reverse", 1), ("reverse", 256)}, out)
    check("pcollapse: the keys of CLI.md", all({"order", "scale", "underflow_fraction", "predicted_fraction", "delta_c", "mse"} <= set(r) for r in runs), out)

rc, out, err = run(BINARY, "leak", "--synthetic", "--n", "64", "--json")
check("leak runs", rc == 0, err)
if rc == 0:
    j = json.loads(out)
    check("leak: the keys of CLI.md", {"leaking_pairs", "max_future_influence", "parallel_vs_autoregressive_max_abs_diff"} <= set(j), out)
    check("leak: MXFP4 V leaks without the fix", j["leaking_pairs"] > 0, out)
rc, out, err = run(BINARY, "leak", "--synthetic", "--n", "64", "--fix", "--json")
check("leak --fix: nothing leaks", rc == 0 and json.loads(out)["leaking_pairs"] == 0 and json.loads(out)["parallel_vs_autoregressive_max_abs_diff"] == 0, out + err)

rc, out, err = run(BINARY, "bias", "--synthetic", "--n", "128", "--json")
check("bias runs", rc == 0, err)
if rc == 0:
    j = json.loads(out)
    check("bias: the keys of CLI.md", {"rows", "coefficient_sum", "positive_rows", "p_bar_one_count", "top_dims"} <= set(j), out)
    check("bias: top_dims entries", all({"dim", "contribution"} <= set(d) for d in j["top_dims"]), out)
rc, out, err = run(BINARY, "bias", "--synthetic", "--n", "64", "--steps", "3", "--fix", "--json")
check("bias over 3 steps with --fix", rc == 0 and len(json.loads(out)["cumulative_coefficient"]) == 3 and "fixes" in json.loads(out), err)

rc, out, err = run(BINARY, "headroom", "--synthetic", "--n", "64", "--json")
check("headroom runs", rc == 0 and {f["format"] for f in json.loads(out)["formats"]} == {"f32", "f16", "bf16"} and len(json.loads(out)["rows"]) == 64, err)

rc, out, err = run(BINARY, "attribute", "--synthetic", "--n", "96", "--recipe", "fa3-fp8", "--json")
check("attribute runs", rc == 0, err)
if rc == 0:
    j = json.loads(out)
    check("attribute: four stages", [s["stage"] for s in j["stages"]] == ["score product", "P cast", "P V product", "O cast"], out)
    check("attribute: the P cast dominates FP8", j["stages"][1]["only_this_low"] > 0.9 * j["all_low"], out)

# bias with the layer input: the query-weight error per step and summed over the steps
rc, out, err = run(BINARY, "bias", "--synthetic", "--n", "64", "--d", "16", "--d-model", "32", "--steps", "3", "--json")
check("bias --d-model runs", rc == 0, err)
if rc == 0:
    j = json.loads(out)
    qw = j["query_weight"]
    check("bias: query_weight keys", {"rank1_cosine_similarity", "dwq_error_norm", "dwq_norm", "dwq_error_relative", "wq_norm", "heads"} <= set(qw), out)
    check("bias: a head's q is x W^Q", all(h["q_projection_residual"] < 1e-6 for h in qw["heads"]), out)
    check("bias: |dW^Q error| summed over 3 steps", len(j["cumulative_dwq_error_norm"]) == 3 and abs(j["cumulative_dwq_error_norm"][0] / qw["dwq_error_norm"] - 1) < 1e-12, out)
    check("bias: the first step's structure against itself", abs(j["structure_cosine_with_first_step"][0] - 1) < 1e-12, out)
    check("bias: coherence in (0, 1]", 0 < j["dwq_error_coherence"] <= 1 + 1e-12, out)

# --plot: a PNG from every analysis where the project's Python has matplotlib, else one line
source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
venv = os.path.join(source, ".venv", "bin", "python")
has_matplotlib = os.path.exists(venv) and subprocess.run([venv, "-c", "import matplotlib"], capture_output=True).returncode == 0
for command, *args in (("bias", "--synthetic", "--n", "64", "--steps", "2", "--fix"), ("pcollapse", "--synthetic", "--n", "128"),
                       ("leak", "--synthetic", "--n", "64"), ("headroom", "--synthetic", "--n", "64"),
                       ("attribute", "--synthetic", "--n", "64", "--recipe", "fa2-bf16")):
    png = os.path.join(TMP, f"{command}.png")
    rc, out, err = run(BINARY, command, *args, "--plot", png)
    if has_matplotlib:
        check(f"{command} --plot draws a PNG", rc == 0 and os.path.getsize(png) > 1000 and open(png, "rb").read(4) == b"\x89PNG", err)
    else:
        check(f"{command} --plot without matplotlib: one line", one_line_error(rc, err, "--plot"), err)
rc, _, err = run(BINARY, "headroom", "--synthetic", "--n", "16", "--plot", os.path.join(TMP, "no", "such", "folder.png"))
check("--plot into a missing folder", one_line_error(rc, err, "--plot", "folder.png"), err)

# NaN-filled tensors: every analysis names the file and the tensor
def write_f32_safetensors(path, tensors):
    header, data = {}, b""
    for name, (shape, values) in tensors.items():
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


ramp = [((i * 37) % 17 - 8) / 8 for i in range(32)]
nan_q = os.path.join(TMP, "nan_q.safetensors")
write_f32_safetensors(nan_q, {"q": ([8, 4], [float("nan")] * 32), "k": ([8, 4], ramp), "v": ([8, 4], ramp), "do": ([8, 4], ramp)})
for command in (("pcollapse",), ("leak",), ("headroom",), ("attribute", "--recipe", "fa2-bf16"), ("bias",)):
    rc, _, err = run(BINARY, command[0], nan_q, *command[1:])
    check(f"{command[0]}: a NaN-filled q", one_line_error(rc, err, "nan_q.safetensors", "'q'", "NaN"), err)
nan_x = os.path.join(TMP, "nan_x.safetensors")
write_f32_safetensors(nan_x, {"q": ([8, 4], ramp), "k": ([8, 4], ramp), "v": ([8, 4], ramp), "do": ([8, 4], ramp), "x": ([8, 6], [float("nan")] * 48)})
rc, _, err = run(BINARY, "bias", nan_x)
check("bias: a NaN-filled x", one_line_error(rc, err, "nan_x.safetensors", "'x'", "NaN"), err)

# bad input: one line, exit 2
for args, phrase in ((("pcollapse", "--synthetic", "--order", "sideways"), "--order"),
                     (("leak", "--synthetic", "--format", "mxfp9"), "mxfp9"),
                     (("bias", "--synthetic", "--recipe", "fa9"), "fa9"),
                     (("headroom", "--synthetic", "--scenario", "calm"), "calm"),
                     (("pcollapse",), "input file or --synthetic"),
                     (("attribute", "--synthetic", "--recipe", "fa2-bf16", "--set", "score_product=exactly"), "score_product"),
                     (("bias", os.path.join(TMP, "missing.safetensors")), "missing.safetensors"),
                     (("bias", "--synthetic", "--d-model", "1"), "--d-model")):
    rc, _, err = run(BINARY, *args)
    check(f"bad input: {' '.join(args)}", one_line_error(rc, err, phrase), err)

start = time.time()
rc, out, err = run(BINARY, "demo", "--out", os.path.join(TMP, "demo"))
seconds = time.time() - start
check("demo runs", rc == 0, err)
check("demo finishes in under two minutes", seconds < 120, f"{seconds:.1f} s")
check("demo prints the four scenarios", all(s in out for s in ("P-collapse", "rounding bias", "leakage", "overflow")), out)
report = json.load(open(os.path.join(TMP, "demo", "demo.json")))
check("demo.json holds every pass", set(report) == {"pcollapse", "bias", "leak", "headroom"}, str(set(report)))
regimes = report["bias"]["regimes"]
dominated = [sum(s["tie_dominated_rows"] for s in r["steps"]) / sum(s["rows"] for s in r["steps"]) for r in regimes]
check("demo: the bias outside and inside the tie regime", len(regimes) == 2 and regimes[0]["tie_gap"] < regimes[1]["tie_gap"]
      and dominated[0] < 0.01 and dominated[1] > 0.5 and regimes[1]["positive_steps"] == len(regimes[1]["steps"])
      and abs(regimes[1]["cumulative_coefficient"][-1]) > 10 * abs(regimes[0]["cumulative_coefficient"][-1]),
      f"{dominated} " + json.dumps(regimes)[:600])
check("demo: the fix stops the leak", report["leak"]["with_fix"]["leaking_pairs"] == 0 and report["leak"]["without_fix"]["leaking_pairs"] > 0)
if "plots:" in out:
    check("demo: four plots", all(os.path.getsize(os.path.join(TMP, "demo", f"{p}.png")) > 1000 for p in ("pcollapse", "bias", "leak", "headroom")))
else:
    check("demo: says why the plots were skipped", "plots skipped" in out, out)
finish("test_analyses_cli")
