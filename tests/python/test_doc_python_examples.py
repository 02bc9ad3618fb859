"""The Python examples docs/python.md shows as running on "my model" (marked `<!-- example: NAME
-->` above the block) run as written on a two-layer BF16 transformer encoder, and do what the
page says: `emulate` changes the gradients the model computes, `AttentionDump` writes one file a
layer that the command line reads."""
import re

import torch

from conftest import ROOT

PAGE = ROOT / "docs" / "python.md"


def examples():
    return dict(re.findall(r"<!-- example: (\w+) -->\n```python\n(.*?)```", PAGE.read_text(), flags=re.S))


def my_model():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(torch.bfloat16)
    return model, torch.randn(2, 16, 32).to(torch.bfloat16)


def gradients(model):
    return [p.grad.clone() for p in model.parameters()]


def test_the_page_shows_both_examples_in_three_lines():
    shown = examples()
    assert set(shown) == {"emulate", "dump"}, set(shown)
    assert all(len(code.strip().splitlines()) == 3 for code in shown.values()), shown


def test_emulate_fp8_attention_in_my_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, batch = my_model()
    exec(examples()["emulate"], {"model": model, "batch": batch})
    emulated = gradients(model)
    model.zero_grad()
    model(batch).sum().backward()
    plain = gradients(model)
    assert any(not torch.equal(a, b) for a, b in zip(emulated, plain))  # FP8 attention's gradients
    assert torch.nn.functional.scaled_dot_product_attention(batch[None], batch[None], batch[None]).dtype \
        == torch.bfloat16  # PyTorch's own function is back after the block


def test_dump_my_models_attention(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, batch = my_model()
    exec(examples()["dump"], {"model": model, "batch": batch})
    files = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert files == ["step0_layer0.safetensors", "step0_layer1.safetensors"], files
    names = {t["name"] for t in cli.json("inspect", tmp_path / "dumps" / files[1])["tensors"]}
    assert names == {"q", "k", "v", "o", "do", "dq", "dk", "dv"}, names
