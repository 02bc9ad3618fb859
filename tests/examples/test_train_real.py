"""examples/train_real.py's short version, as CI runs it: 6 steps (2 layers, context 128, dumps at
steps 0 and 5), then `roundscope report` over its dumps. Checks what the run logs (the corpus,
the loss, the attention on the first token per layer and head at each dump); that the report
covers every layer, head and step, with P-collapse's prediction within 0.01 of the measurement
on every head and the kernel's o compared with fa2-bf16; that a run stopped after a dump and
resumed gives the bits of one never stopped; and that bad options are refused with exit 2."""
import json
import subprocess
import sys
import time

import pytest

import roundscope

from conftest import ROOT, run_example

sys.path.insert(0, str(ROOT / "examples"))
import train_real  # noqa: E402

EXAMPLE = ROOT / "examples" / "train_real.py"
SMALL = ["--steps", "40", "--dump-every", "4", "--layers", "2", "--context", "64", "--d-model", "64", "--threads", "1"]
pytestmark = pytest.mark.slow


def train(*args, timeout=600):
    return run_example("train_real.py", *args, timeout=timeout)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("real-run")
    p = train("--out", out, "--steps", "6", "--dump-every", "5", "--layers", "2", "--context", "128")
    assert p.returncode == 0, p.stderr[-2000:]
    return out


def test_the_run_logs_corpus_loss_and_sink_mass(short_run):
    log = json.loads((short_run / "sinks.json").read_text())
    assert log["corpus"]["files"] > 100 and log["corpus"]["bytes"] > 5e6, "the standard library's sources"
    assert len(log["steps"]) == 6 and log["steps"][-1] < log["steps"][0], log["steps"]
    assert [d["step"] for d in log["dumps"]] == [0, 5]
    for d in log["dumps"]:  # per layer and head
        assert len(d["sink_mass"]) == 2 and all(len(layer) == 4 and all(0 <= m <= 1 for m in layer)
                                                for layer in d["sink_mass"]), d


def test_the_report_covers_every_layer_head_and_step(cli, short_run):
    cli.run("report", short_run, "-o", short_run / "report", "--recipe", "fa2-bf16", "--json")
    r = roundscope.load_report(short_run / "report")
    assert sorted((f["layer"], f["step"]) for f in r["files"]) == [(layer, s) for layer in (0, 1) for s in (0, 5)]
    assert len(r["heads"]) == 16, "4 heads a file"
    assert all(f["has_x"] for f in r["files"]), "the dumps carry x and wq (the dW^Q part)"
    for h in r["heads"]:
        runs = h["pcollapse"]["runs"]
        assert all(abs(x["underflow_fraction"] - x["predicted_fraction"]) <= 0.01 for x in runs), (h["file"], runs)
    assert len(r["compare"]) == 4
    assert all(set(c["compare"]["fa2-bf16"]["outputs"]) == {"o", "dq", "dk", "dv"} for c in r["compare"])
    assert len(r["bias_over_steps"]) == 8 and all(s["steps"] == [0, 5] for s in r["bias_over_steps"])


@pytest.mark.parametrize("args, option", [
    (["--context", "0"], "--context"), (["--context", "-5"], "--context"), (["--steps", "0"], "--steps"),
    (["--lr", "nan"], "--lr"), (["--lr", "0"], "--lr"), (["--heads", "3"], "--heads"),
    (["--d-model", "-1"], "--d-model"),
    (["--weight-decay", "inf"], "--weight-decay"), (["--weight-decay", "-0.1"], "--weight-decay"),
])
def test_a_bad_option_exits_2_naming_it(tmp_path, capsys, args, option):
    """In this process (main(argv)): the checks run before any work, and a process a case would
    spend its seconds importing torch."""
    with pytest.raises(SystemExit) as exit:
        train_real.main(["--out", str(tmp_path / "bad"), *args])
    assert exit.value.code == 2 and option in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_a_resumed_run_gives_the_bits_of_one_never_stopped(tmp_path):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    p = train("--out", whole, *SMALL)
    assert p.returncode == 0, p.stderr[-500:]
    first = subprocess.Popen([sys.executable, EXAMPLE, "--out", stopped, *SMALL], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    # stop it once its checkpoint of step 4 or later is written: the run writes the checkpoint, then
    # the log that lists its dumps (each replaced atomically), so the log is read only once it is there
    log = stopped / "sinks.json"
    while time.time() < deadline and first.poll() is None:
        if log.exists() and (stopped / "checkpoint.pt").exists() and len(json.loads(log.read_text())["dumps"]) >= 2:
            break
        time.sleep(0.02)
    first.kill()
    first.wait()
    p = train("--out", stopped, *SMALL, "--resume")
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-500:]
    resumed_at = [int(line.split()[3]) for line in p.stdout.splitlines() if line.startswith("resumed at step")]
    assert resumed_at and 4 <= resumed_at[0] < 39, "from a step after the first and before the end"
    logs = [json.loads((d / "sinks.json").read_text()) for d in (whole, stopped)]
    assert all(logs[0][k] == logs[1][k] for k in ("steps", "dumps")), "losses and sink masses"
    assert (whole / "step39_layer1.safetensors").read_bytes() == (stopped / "step39_layer1.safetensors").read_bytes()
    # options that shape the run must be the checkpoint's
    p = train(*SMALL, "--resume", "--lr", "1e-3", "--out", stopped, timeout=120)
    assert p.returncode == 2 and "--lr 0.002" in p.stderr, p.stderr[-300:]


def _set(path, value):
    def change(state):
        *parents, last = path.split(".")
        x = state
        for p in parents:
            x = x[p]
        x[last] = value(x[last]) if callable(value) else value
    return change


def _optimizer_without_state(state):
    state["optimizer"]["state"] = {}


def _moment_of_another_shape(state):
    s = state["optimizer"]["state"][0]
    s["exp_avg"] = s["exp_avg"].flatten()[:3].clone()


def _model_weight_nan(state):
    name = next(n for n, t in state["model"].items() if t.is_floating_point())
    state["model"][name] = state["model"][name].clone()
    state["model"][name].view(-1)[0] = float("nan")


def _moment_inf(state):
    state["optimizer"]["state"][0]["exp_avg_sq"].view(-1)[0] = float("inf")


def _model_tensor_of_another_shape(state):
    name = next(iter(state["model"]))
    state["model"][name] = state["model"][name].flatten()[:5].clone()


@pytest.mark.parametrize("change, field", [
    (_set("step", -5), "step"), (_set("step", 10**9), "step"), (_set("step", "five"), "step"),
    (_set("step", True), "step"), (_set("log", "a log"), "log"), (_set("log.steps", lambda x: x[:-1]), "log.steps"),
    (_set("log.seconds", float("nan")), "log.seconds"), (_model_tensor_of_another_shape, "model"),
    (_optimizer_without_state, "optimizer"), (_moment_of_another_shape, "optimizer"),
    (_set("optimizer", [1, 2]), "optimizer"), (_set("schedule", "x"), "schedule"),
    (_set("generator", lambda g: g[:10].clone()), "generator"), (_set("generator", "seed"), "generator"),
    (_set("options", 7), "not a checkpoint"),
    (_set("schedule.last_epoch", 10**9), "schedule"), (_model_weight_nan, "model"), (_moment_inf, "optimizer"),
    (_set("log.steps", lambda x: x[:-1] + ["a loss"]), "log.steps"),
    (_set("log.steps", lambda x: x[:-1] + [float("nan")]), "log.steps"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_checkpoint_with_a_wrong_field_is_one_line_naming_it(short_run, tmp_path, capsys, change, field):
    """A checkpoint this example could have written, but for one field: the run stops with exit 2
    and one line naming the field, before any training (never a traceback, a step of -5 or a run
    that trains nothing with exit 0)."""
    import torch

    state = torch.load(short_run / "checkpoint.pt", weights_only=True)
    change(state)
    out = tmp_path / "run"
    out.mkdir()
    torch.save(state, out / "checkpoint.pt")
    with pytest.raises(SystemExit) as exit:
        train_real.main(["--out", str(out), "--steps", "6", "--dump-every", "5", "--layers", "2", "--context", "128",
                         "--resume"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and field in err.splitlines()[-1], err
    assert sum(": error: " in line for line in err.splitlines()) == 1 and "Traceback" not in err, err
    assert not list(out.glob("*.safetensors")), "before any training"


def test_resume_without_a_checkpoint(tmp_path):
    p = train(*SMALL, "--resume", "--out", tmp_path / "run", timeout=120)
    assert p.returncode == 2 and "no checkpoint" in p.stderr, p.stderr[-300:]
