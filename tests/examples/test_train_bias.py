"""The BF16-bias training run's short version, as CI runs it: examples/train_bias.py's three runs
(no fix, max adjustment, delta from a float32 O) for 11 steps with dumps at steps 0, 5 and 10,
then examples/bias_verdict.py over them. Checks that the runs log and dump what the verdict
reads, that the released attention's o in the dumps is fa2-bf16-torch's bit for bit (and with the
max adjustment, fa2-bf16-torch with max_adjust=on), that the verdict covers every run, layer and
head, that delta from a float32 O leaves a coefficient orders of magnitude below the unfixed one,
and that bad options are refused with exit 2."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples"))
import train_bias  # noqa: E402

TRAIN, VERDICT = ROOT / "examples" / "train_bias.py", ROOT / "examples" / "bias_verdict.py"
FIXES = ("none", "max-adjust", "f32-delta")
pytestmark = pytest.mark.slow


def python(*args, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("bias-run")
    for fix in FIXES:
        p = python(TRAIN, "--fix", fix, "--out", out / fix, "--steps", "11", "--dump-every", "5", "--context", "64",
                   "--threads", "1")
        assert p.returncode == 0, (fix, p.stderr[-2000:])
    return out


@pytest.mark.parametrize("fix", FIXES)
def test_each_run_logs_its_loss_and_max_logits(runs, fix):
    log = json.loads((runs / fix / "log.json").read_text())
    assert len(log["steps"]) == 11 and len(log["clamped_rows"]) == 11
    assert [d["step"] for d in log["dumps"]] == [0, 5, 10] and all(len(d["max_logit"]) == 2 for d in log["dumps"])


@pytest.mark.parametrize("fix, settings", [("none", []), ("max-adjust", ["--set", "max_adjust=on"])])
def test_the_dumped_o_is_the_recipes_bit_for_bit(cli, runs, fix, settings):
    o = cli.json("compare", runs / fix / "step10_layer1.safetensors", "--recipe", "fa2-bf16-torch",
                 *settings)["outputs"]["o"]
    assert o["matched"] == o["total"], o


def test_the_verdict_covers_every_run_layer_and_head(cli, runs):
    p = python(VERDICT, runs, "--roundscope", cli.path, "--json", runs / "verdict.json")
    assert p.returncode == 0 and "verdict:" in p.stdout, p.stderr[-2000:]
    v = json.loads((runs / "verdict.json").read_text())
    keys = sorted((r["run"], r["layer"], r["head"]) for r in v["rows"])
    assert keys == sorted((f, layer, h) for f in FIXES for layer in (0, 1) for h in (0, 1))
    assert all(r["dumps"] == 3 and r["positive"] + r["negative"] <= 3 for r in v["rows"]), v["rows"][:2]
    largest = {f: max(abs(r["cumulative"]) for r in v["rows"] if r["run"] == f) for f in FIXES}
    assert largest["f32-delta"] < 1e-2 * largest["none"], largest
    verdict = v["verdict"]
    assert verdict.split(":")[0] in ("confirmed in", "refuted", "undecided") or verdict.startswith("confirmed")


@pytest.mark.parametrize("args, option", [(["--fix", "bogus"], "--fix"), (["--heads", "3"], "--heads"),
                                          (["--lr", "nan"], "--lr"), (["--context", "0"], "--context")])
def test_a_bad_option_exits_2_naming_it(tmp_path, capsys, args, option):
    """In this process (main(argv)): the checks run before any work."""
    with pytest.raises(SystemExit) as exit:
        train_bias.main(["--out", str(tmp_path / "bad"), *args])
    assert exit.value.code == 2 and option in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_the_verdict_without_runs_names_the_folder(tmp_path):
    p = python(VERDICT, tmp_path / "nowhere", timeout=120)
    assert p.returncode != 0 and "nowhere" in p.stderr, p.stderr
