"""examples/finetune_smollm2.py's short version, as CI runs it: SmolLM2-135M trained for 2 steps of
32 tokens under roundscope.torch.monitor (freq 1, layers 0 and 29), with --bench (the same steps
again without the monitor, which must give the same losses). The TensorBoard scalars the monitor
wrote are read back: one a logged step and layer, each the mean of that layer's heads in the
JSON-lines file. Bad options are refused with exit 2."""
import json
import math

import pytest

from conftest import run_example

pytestmark = pytest.mark.slow


def finetune(*args, timeout=900):
    return run_example("finetune_smollm2.py", *args, timeout=timeout)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("finetune")
    p = finetune("--out", out, "--steps", "2", "--freq", "1", "--tokens", "32", "--layers", "0,29", "--rows", "32",
                 "--bench")
    assert p.returncode == 0, p.stderr[-3000:]
    return out, p.stdout


def test_the_run_trains_and_logs_every_logged_step(short_run):
    out, stdout = short_run
    result = json.loads((out / "result.json").read_text())
    assert result["logged_steps"] == [0, 1]
    assert all(math.isfinite(result[k]) for k in ("first_loss", "last_loss", "plain_wall_s", "overhead_wall"))
    assert "overhead" in stdout and "step 1: loss" in stdout


def test_tensorboard_holds_each_layers_mean_of_the_jsonl_heads(short_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _ = short_run
    lines = [json.loads(x) for x in (out / "monitor.jsonl").read_text().splitlines()]
    assert sorted({(x["step"], x["layer"]) for x in lines}) == [(s, layer) for s in (0, 1) for layer in (0, 29)]
    assert all(len([x for x in lines if (x["step"], x["layer"]) == (s, layer)]) == 9
               for s in (0, 1) for layer in (0, 29)), "SmolLM2's 9 query heads"
    events = EventAccumulator(str(out / "tensorboard" / "monitor")).Reload()
    for layer in (0, 29):
        scalars = {e.step: e.value for e in events.Scalars(f"sink_mass/layer{layer:02d}")}
        assert sorted(scalars) == [0, 1]
        for step, value in scalars.items():
            heads = [x["values"]["sink_mass"] for x in lines if (x["step"], x["layer"]) == (step, layer)]
            assert value == pytest.approx(sum(heads) / len(heads), rel=1e-6)  # TensorBoard keeps float32


@pytest.mark.parametrize("args", [["--layers", "30"], ["--layers", "a"], ["--steps", "0"], ["--rows", "-1"],
                                  ["--text", "nope"], ["--lr", "nan"], ["--lr", "inf"], ["--lr", "0"]])
def test_bad_options_exit_2(args, tmp_path):
    p = finetune("--out", tmp_path, *args, timeout=120)
    assert p.returncode == 2 and "error:" in p.stderr.strip().splitlines()[-1], p.stderr
    assert not (tmp_path / "result.json").exists()
