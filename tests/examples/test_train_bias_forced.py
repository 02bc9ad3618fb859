"""The forced-regime BF16-bias experiment (examples/train_bias_forced.py and its verdict,
examples/bias_forced_verdict.py): its statistics on tensors built to have a known answer, its
short runs (every batch logged, the gate applied), the verdict rule producing each of its
outcomes from logs made to, and bad options refused with exit 2."""
import copy
import json
import math
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples"))
import bias_forced_verdict  # noqa: E402
import train_bias_forced  # noqa: E402

TRAIN, VERDICT = ROOT / "examples" / "train_bias_forced.py", ROOT / "examples" / "bias_forced_verdict.py"
FIXES = ("none", "max-adjust", "f32-delta")


def python(*args, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_tie_counts_tell_a_tie_a_single_key_and_neither():
    """One row each: two keys at 1 and a rest of 2^-12 (tie-dominated); one key at 1 and 2^-12
    (one key); two keys at 1 and a rest of 2^-6 (neither); one key alone (not one-key: l = 1)."""
    rows = torch.zeros(1, 1, 4, 8)
    rows[0, 0, 0, :3] = torch.tensor([1.0, 1.0, 2.0 ** -12])
    rows[0, 0, 1, :2] = torch.tensor([1.0, 2.0 ** -12])
    rows[0, 0, 2, :3] = torch.tensor([1.0, 1.0, 2.0 ** -6])
    rows[0, 0, 3, 0] = 1.0
    tied, one_key = train_bias_forced.tie_counts(rows)
    assert tied.tolist() == [1] and one_key.tolist() == [1]
    near = rows.clone()
    near[0, 0, 0, 1] = 1 - 2.0 ** -10  # rounds to 1 in BF16: still at P-bar = 1
    assert train_bias_forced.tie_counts(near)[0].tolist() == [1]


def test_the_float64_delta_is_the_exact_rowsum():
    """delta_float64 against the same sums formed element by element in Python's float."""
    g = torch.Generator().manual_seed(3)
    q, k, v, d_o = (torch.randn(1, 1, 5, 4, generator=g).to(torch.bfloat16) for _ in range(4))
    got = train_bias_forced.delta_float64(q, k, v, d_o, causal=True)[0, 0, :, 0].tolist()
    Q, K, V, G = ([[float(x) for x in r] for r in t[0, 0].tolist()] for t in (q, k, v, d_o))
    for i in range(5):
        s = [sum(a * b for a, b in zip(Q[i], K[j])) / 2 for j in range(i + 1)]
        w = [math.exp(x - max(s)) for x in s]
        o = [sum(w[j] * V[j][c] for j in range(i + 1)) / sum(w) for c in range(4)]
        assert got[i] == pytest.approx(sum(G[i][c] * o[c] for c in range(4)), rel=1e-12, abs=1e-15)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("forced-run")
    for fix in FIXES:
        p = python(TRAIN, "--fix", fix, "--out", out / fix, "--steps", "60", "--gate-step", "50", "--context", "64",
                   "--threads", "1")
        assert p.returncode == 0, (fix, p.stderr[-2000:])
        assert "gate at step 50" in p.stdout, p.stdout
    return out


@pytest.mark.parametrize("fix", FIXES)
def test_every_batch_is_logged_and_the_gate_stops_a_run_without_the_regime(runs, fix):
    log = json.loads((runs / fix / "log.json").read_text())
    formed = log["gate"]["tie_dominated_share"] >= 0.01
    assert len(log["batches"]) == (60 if formed or fix == "max-adjust" else 50)
    for b in log["batches"]:
        assert math.isfinite(b["loss"]) and len(b["wq"]) == 2 and len(b["wq"][0]) == 2
        for layer in ("0", "1"):
            e = b["layers"][layer]
            assert e["rows"] == 8 * 64
            for key in ("tie_dominated", "one_key", "clamped", "max_logit", "coef", "coef_l_bf16", "coef_l_f32"):
                assert len(e[key]) == 2, key
    e = log["batches"][-1]["layers"]["0"]
    if fix == "none":  # its delta is the one from its own O
        assert e["coef"] == e["coef_l_bf16"]
    if fix == "f32-delta":  # delta from a float32 O: float32 rounding only, far below the BF16 O's
        assert max(map(abs, e["coef"])) < 1e-2 * max(map(abs, e["coef_l_bf16"]))


def test_the_verdict_on_the_short_runs(runs):
    p = python(VERDICT, runs, "--json", runs / "verdict.json", timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    v = json.loads((runs / "verdict.json").read_text())
    assert sorted((r["run"], r["layer"], r["head"]) for r in v["rows"]) == sorted(
        (f, layer, h) for f in FIXES for layer in (0, 1) for h in (0, 1))
    gate = json.loads((runs / "none" / "log.json").read_text())["gate"]["tie_dominated_share"]
    assert v["verdict"].startswith("undecided" if gate < 0.01 else ("confirmed", "refuted")), v["verdict"]


def made_up_logs(coef_sign, unstable):
    """Three logs of 1300 batches where the gate passed, with delta errors of one sign (or of
    alternating signs) and, if `unstable`, a run without a fix whose loss ends 0.5 above."""
    def batch(step, coef, loss):
        e = {"rows": 100, "tie_dominated": [5, 0], "one_key": [0, 0], "clamped": [0, 0], "max_logit": [10.0, 9.0],
             "coef": [coef, 0.0], "coef_l_bf16": [coef, 0.0], "coef_l_f32": [coef / 4, 0.0]}
        return {"step": step, "loss": loss, "layers": {"0": e}, "wq": [[5.0, 5.0]]}

    logs = {}
    for run in FIXES:
        batches = []
        for step in range(1300):
            coef = (1e-3 if coef_sign else (-1) ** step * 1e-3) if run == "none" else 0.0
            loss = 2.0 + (0.5 if unstable and run == "none" and step >= 1000 else 0.0)
            batches.append(batch(step, coef, loss))
        logs[run] = {"args": {"gate_step": 300}, "gate": {"tie_dominated_share": 0.05}, "batches": batches}
    return logs


@pytest.mark.parametrize("coef_sign, unstable, outcome", [(True, True, "confirmed"), (True, False, "refuted at this"),
                                                          (False, True, "refuted, no one-signed")])
def test_the_rule_reaches_each_outcome(coef_sign, unstable, outcome):
    text, _ = bias_forced_verdict.verdict(made_up_logs(coef_sign, unstable))
    assert text.startswith(outcome), text


def test_the_rule_is_undecided_without_the_gate():
    logs = made_up_logs(True, True)
    logs["none"]["gate"]["tie_dominated_share"] = 0.009
    assert bias_forced_verdict.verdict(copy.deepcopy(logs))[0].startswith("undecided")


@pytest.mark.parametrize("args, option", [(["--fix", "bogus"], "--fix"), (["--repeat", "600"], "--repeat"),
                                          (["--gate-step", "3"], "--gate-step"), (["--lr", "nan"], "--lr"),
                                          (["--positions", "other"], "--positions")])
def test_a_bad_option_exits_2_naming_it(tmp_path, capsys, args, option):
    with pytest.raises(SystemExit) as exit:
        train_bias_forced.main(["--out", str(tmp_path / "bad"), *args])
    assert exit.value.code == 2 and option in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_the_verdict_without_runs_names_the_folder(tmp_path):
    p = python(VERDICT, tmp_path / "nowhere", timeout=120)
    assert p.returncode == 2 and "nowhere" in p.stderr, p.stderr


@pytest.mark.parametrize("text", ["{", "{}", "[]", '{"args": {}, "batches": [], "gate": null}'])
def test_the_verdict_refuses_a_log_that_is_not_a_runs(tmp_path, text):
    for fix in FIXES:
        (tmp_path / fix).mkdir()
        (tmp_path / fix / "log.json").write_text(text)
    p = python(VERDICT, tmp_path, timeout=120)
    assert p.returncode == 2 and "none/log.json" in p.stderr and "Traceback" not in p.stderr, p.stderr
