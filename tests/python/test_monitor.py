"""roundscope.torch.monitor: a training loop's logged steps write the report's figures to
TensorBoard and a JSON-lines file, the same numbers `roundscope report` gives on that step's dump;
other steps cost nothing and write nothing."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import roundscope
import roundscope.torch as rst
from roundscope import _report_metrics as rm

H, N, D = 2, 64, 16


class TinyAttention(torch.nn.Module):
    """Two causal attention layers on BF16 q, k, v, each through F.scaled_dot_product_attention."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.ModuleList(torch.nn.Linear(D, 3 * D * H, dtype=torch.bfloat16) for _ in range(2))

    def forward(self, x):
        for p in self.proj:
            q, k, v = p(x).view(1, N, 3, H, D).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + o.transpose(1, 2).reshape(1, N, H * D)[..., :D]
        return x


def train(monitor, steps):
    model = TinyAttention()
    x = torch.randn(1, N, D, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(1))
    for step in range(steps):
        with monitor.step(step):
            model(x).float().square().mean().backward()


def test_logged_steps_write_the_reports_figures(tmp_path):
    m = rst.monitor(tmp_path / "tb", jsonl=tmp_path / "m.jsonl", freq=2, rows=32, keep=tmp_path / "keep")
    train(m, 4)
    assert m.logged_steps == [0, 2]
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert sorted({(x["step"], x["layer"], x["head"]) for x in lines}) == [
        (s, layer, h) for s in (0, 2) for layer in (0, 1) for h in range(H)]
    # the same figures as the report on the kept dump of step 2, run apart with the same options
    roundscope.report(tmp_path / "keep" / "step2" / "dumps", tmp_path / "apart", recipe=["fa2-bf16"], rows=32,
                      seed=0, html=False, progress=None)
    _, heads, _ = rm.read_report(tmp_path / "apart" / "report.json")
    logged = {(x["layer"], x["head"]): x["values"] for x in lines if x["step"] == 2}
    assert len(heads) == 2 * H
    for h in heads:
        for name, value in h["values"].items():
            got = logged[(h["layer"], h["head"])][name]
            if value is None or (isinstance(value, float) and math.isnan(value)):
                assert got is None or got == "nan", name
            else:
                assert got == value, name
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb" / "monitor")).Reload()
    assert "sink_mass/layer00" in events.Tags()["scalars"]
    steps = [e.step for e in events.Scalars("sink_mass/layer01")]
    assert steps == [0, 2], steps
    mean_at_2 = [e.value for e in events.Scalars("sink_mass/layer01") if e.step == 2][0]
    want = np.mean([h["values"]["sink_mass"] for h in heads if h["layer"] == 1])
    assert mean_at_2 == pytest.approx(want, rel=1e-6)  # TensorBoard keeps float32


def test_steps_not_logged_capture_nothing(tmp_path, monkeypatch):
    m = rst.monitor(jsonl=tmp_path / "m.jsonl", freq=10, start_step=5)
    assert [s for s in range(30) if m.logged(s)] == [5, 15, 25]
    original = F.scaled_dot_product_attention
    with m.step(3):
        assert F.scaled_dot_product_attention is original  # no capture, no wrapper
    assert not (tmp_path / "m.jsonl").exists() and m.logged_steps == []


@pytest.mark.parametrize("kwargs, error, start", [
    ({}, ValueError, "logdir: the monitor writes nowhere"),
    ({"jsonl": "m.jsonl", "freq": 0}, ValueError, "freq: must be an integer from 1"),
    ({"jsonl": "m.jsonl", "rows": 8}, ValueError, "rows: a sample needs at least 32 rows"),
    ({"jsonl": "m.jsonl", "recipes": "fa2-bf16"}, TypeError, "recipes: expected a sequence"),
    ({"jsonl": "m.jsonl", "layers": [-1]}, ValueError, "layers: must be an integer from 0"),
    ({"jsonl": "m.jsonl", "run": "a/b"}, ValueError, "run: 'a/b' is not a folder name"),
])
def test_bad_options_are_refused_by_name(kwargs, error, start):
    with pytest.raises(error) as e:
        rst.monitor(**kwargs)
    assert str(e.value).startswith(start), str(e.value)
