"""roundscope.dump on a two-layer toy transformer trained on the CPU: the files it writes hold
exactly the q, k, v, o and do (and dq, dk, dv) that PyTorch computed, bit for bit, with the
metadata roundscope reads, and `roundscope inspect` reads them and agrees; FP8 kernels with
descale factors and functions taking their options positionally are recorded as called."""
import json
import math
import os
import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import roundscope as rs
from conftest import ROOT
from files_by_hand import read_safetensors
from roundscope.dump import AttentionDump

sys.path.insert(0, str(ROOT / "examples"))
from toy_transformer import ToyTransformer  # noqa: E402

LAYERS, HEADS, WIDTH = 2, 4, 32


class Recording:
    """The attention of one block: F.scaled_dot_product_attention (looked up at each call, so the
    dump sees it), with this step's q, k, v, o kept and their gradients retained."""

    def __init__(self):
        self.kept, self.step = {}, None

    def __call__(self, q, k, v, is_causal):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        for t in (q, k, v, o):
            t.retain_grad()
        self.kept[self.step] = (q, k, v, o)
        return o


def raw_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three BF16 training steps with step 1 of both layers dumped: (folder, dump, recordings)."""
    out = tmp_path_factory.mktemp("dump")
    torch.manual_seed(0)
    model = ToyTransformer(vocab=64, d_model=WIDTH, heads=HEADS, layers=LAYERS)
    recordings = [Recording() for _ in range(LAYERS)]
    for block, recording in zip(model.blocks, recordings):
        block.attention = recording
    model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dump = AttentionDump(out, layers=[0, 1], steps=[1])
    for step in range(3):
        for recording in recordings:
            recording.step = step
        tokens = torch.randint(0, 64, (2, 16))
        with dump.step(step):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, 64), tokens[:, 1:].reshape(-1))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return out, dump, recordings


def reference(recordings, layer):
    q, k, v, o = recordings[layer].kept[1]
    assert all(t.grad is not None for t in (q, k, v, o))
    return {"q": q, "k": k, "v": v, "o": o, "do": o.grad, "dq": q.grad, "dk": k.grad, "dv": v.grad}


def test_one_file_per_chosen_layer_and_step(trained):
    out, dump, _ = trained
    expected = sorted(str(out / f"step1_layer{layer}.safetensors") for layer in (0, 1))
    assert sorted(map(str, dump.written)) == expected
    assert sorted(p.name for p in out.iterdir()) == [f"step1_layer{layer}.safetensors" for layer in (0, 1)]


@pytest.mark.parametrize("layer", [0, 1])
def test_the_files_hold_what_pytorch_computed(trained, layer):
    out, _, recordings = trained
    want = reference(recordings, layer)
    tensors, metadata = read_safetensors(out / f"step1_layer{layer}.safetensors")
    assert set(tensors) == set(want)
    for name, t in want.items():
        dtype, shape, data = tensors[name]
        assert (dtype, shape) == ("BF16", list(t.shape)), name
        assert data == raw_bytes(t), name
    assert metadata["layer"] == str(layer) and metadata["step"] == "1" and metadata["causal"] == "true", metadata
    assert float(metadata["softmax_scale"]) == 1 / math.sqrt(WIDTH // HEADS)


@pytest.mark.parametrize("layer", [0, 1])
def test_roundscope_reads_the_same_bits_and_exact_means(cli, trained, layer):
    out, _, recordings = trained
    doc = cli.json("inspect", out / f"step1_layer{layer}.safetensors", "--checksum")
    assert doc["metadata"]["causal"] == "true"
    got = {t["name"]: t for t in doc["tensors"]}
    for name, t in reference(recordings, layer).items():
        g = got[name]
        values = [Fraction(x) for x in t.detach().float().reshape(-1).tolist()]
        assert g["crc32"] == zlib.crc32(raw_bytes(t)), name
        assert g["dtype"] == "bf16" and g["shape"] == list(t.shape), g
        assert g["mean"] == float(sum(values, Fraction(0)) / len(values)), name
        assert g["min"] == float(min(values)) and g["max"] == float(max(values)), name


def fp8_attention(q8, k8, v8, descale_q=None, descale_k=None, descale_v=None, causal=False):
    q, k, v = q8.float() * descale_q, k8.float() * descale_k, v8.float() * descale_v
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).to(torch.bfloat16)


def test_an_fp8_kernel_with_descale_factors(cli, tmp_path):
    """FP8 inputs are kept as FP8, the factors saved, the SDPA call inside not counted as a layer."""
    dump = AttentionDump(tmp_path)
    attention = dump.wrap(fp8_attention)
    x = torch.randn(1, 2, 8, 16)
    scales = {n: torch.tensor(x.abs().max().item() / 448.0) for n in ("q", "k", "v")}
    inputs = {n: (x / scales[n]).to(torch.float8_e4m3fn) for n in scales}
    with dump.step(7):
        attention(inputs["q"], inputs["k"], inputs["v"], descale_q=scales["q"], descale_k=scales["k"],
                  descale_v=scales["v"], causal=True)
    assert [p.name for p in tmp_path.iterdir()] == ["step7_layer0.safetensors"]
    path = tmp_path / "step7_layer0.safetensors"
    tensors, metadata = read_safetensors(path)
    assert {n: tensors[n][0] for n in ("q", "k", "v", "o")} == {"q": "F8_E4M3", "k": "F8_E4M3", "v": "F8_E4M3",
                                                                "o": "BF16"}
    assert all(tensors[n][2] == raw_bytes(inputs[n]) for n in ("q", "k", "v"))
    assert float(metadata["descale_q"]) == scales["q"].item() and metadata["causal"] == "true", metadata
    got = {t["name"]: t for t in cli.json("inspect", path, "--checksum")["tensors"]}
    assert got["q"]["dtype"] == "e4m3" and got["q"]["crc32"] == zlib.crc32(raw_bytes(inputs["q"]))


def positional_attention(q, k, v, mask, causal, q_bucket, k_bucket):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@pytest.mark.parametrize("names, causal", [(("mask", "causal", "q_bucket_size", "k_bucket_size"), "true"),
                                           ((), "false")])
def test_options_given_positionally(tmp_path, names, causal):
    """As the BF16-bias paper's code calls its kernel (FlashAttentionFunction.apply(q, k, v, None,
    True, 512, 512)): named by `positional`, causal is recorded; unnamed, it is lost."""
    dump = AttentionDump(tmp_path)
    attention = dump.wrap(positional_attention, positional=names)
    x = torch.randn(1, 2, 8, 16)
    with dump.step(0):
        attention(x, x, x, None, True, 512, 512)
    _, metadata = read_safetensors(tmp_path / "step0_layer0.safetensors")
    assert metadata["causal"] == causal


def encoder(seed):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(torch.bfloat16)


def test_micro_batches_under_emulate_are_recorded_as_such_and_check_passes(cli, tmp_path):
    """Gradient accumulation: two micro-batches in one step are micro-batches 0 and 1 of layers 0
    and 1, not layers 0-3; inside emulate the recipe is recorded, and `roundscope check` verifies
    every output bit of every file against it."""
    import roundscope.torch as rst
    model = encoder(1)
    batches = [torch.randn(2, 16, 32).to(torch.bfloat16) for _ in range(2)]
    dump = AttentionDump(tmp_path, steps=[4])
    with rst.emulate("fa3-fp8") as mode, dump.step(4):
        for batch in batches:
            model(batch).float().sum().backward()
    assert mode.emulated == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step4_layer0.safetensors", "step4_layer1.safetensors", "step4_mb1_layer0.safetensors",
        "step4_mb1_layer1.safetensors"]
    for name, micro, layer in [("step4_layer1", "0", "1"), ("step4_mb1_layer0", "1", "0")]:
        tensors, metadata = read_safetensors(tmp_path / f"{name}.safetensors")
        assert (metadata["micro_batch"], metadata["layer"], metadata["step"]) == (micro, layer, "4")
        assert metadata["recipe"] == "fa3-fp8" and "recipe_settings" not in metadata
        assert {"q", "k", "v", "o", "do", "dq", "dk", "dv"} <= set(tensors)
    first, _ = read_safetensors(tmp_path / "step4_layer0.safetensors")
    second, _ = read_safetensors(tmp_path / "step4_mb1_layer0.safetensors")
    assert first["q"][2] != second["q"][2]  # each micro-batch's own inputs
    result = cli.json("check", tmp_path)
    assert result["failed"] == 0 and result["passed"] == 4, result
    # the report keeps the micro-batches apart and adds them up per step, as their gradients add
    report = tmp_path.parent / (tmp_path.name + "-report")
    cli.run("report", tmp_path, "-o", report, "--no-html")
    summary = json.loads((report / "report.json").read_text())
    assert sorted((f["file"], f["micro_batch"]) for f in summary["files"]) == [
        ("step4_layer0.safetensors", 0), ("step4_layer1.safetensors", 0), ("step4_mb1_layer0.safetensors", 1),
        ("step4_mb1_layer1.safetensors", 1)]
    heads = json.loads((report / "layers" / "layer0.json").read_text())["heads"]
    # ... and the batch's entries of a head too: the model's head 0 is every flat head h with h % heads == 0
    per_batch = {f["file"]: f["heads_per_batch"] for f in summary["files"]}
    assert {f["batch"] for f in summary["files"]} == {2}
    parts = [h["bias"]["kernel"]["coefficient_sum"] for h in heads if h["head"] % per_batch[h["file"]] == 0]
    series = next(s for s in summary["bias_over_steps"] if s["layer"] == 0 and s["head"] == 0)
    assert len(parts) == 4 and series["steps"] == [4]
    assert series["coefficient_sum"][0] == pytest.approx(sum(parts), rel=1e-12)
    # one flipped bit in a kernel output fails the check: the comparison above can fail
    dump_bits = rs.read(tmp_path / "step4_layer0.safetensors")
    tensors = {n: a.copy() for n, a in dump_bits.items()}
    tensors["o"].view(np.uint16)[0, 0, 3, 5] ^= 1
    rs.write(tmp_path / "step4_layer0.safetensors", tensors, rs.read_metadata(tmp_path / "step4_layer0.safetensors"))
    assert cli.run("check", tmp_path, check=False).returncode == 1


def test_the_same_step_entered_again_is_the_next_micro_batch(tmp_path):
    model = encoder(2)
    dump = AttentionDump(tmp_path, layers=[1], recipe="fa2-bf16", settings={"p_scale": 256})
    for _ in range(2):
        with dump.step(0):
            model(torch.randn(2, 8, 32).to(torch.bfloat16)).float().sum().backward()
    with dump.step(0, micro_batch=7):
        model(torch.randn(2, 8, 32).to(torch.bfloat16))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step0_layer1.safetensors", "step0_mb1_layer1.safetensors", "step0_mb7_layer1.safetensors"]
    _, metadata = read_safetensors(tmp_path / "step0_mb7_layer1.safetensors")
    assert metadata["recipe"] == "fa2-bf16" and json.loads(metadata["recipe_settings"]) == {"p_scale": 256}
    with pytest.raises(ValueError, match="^micro_batch: "):
        with dump.step(1, micro_batch=-1):
            pass
    with pytest.raises(ValueError, match="^settings: "):
        AttentionDump(tmp_path, settings={"p_scale": 256})


def test_files_are_written_byte_for_byte_the_same_or_by_the_safetensors_package(tmp_path, monkeypatch):
    """The default writer gives the same bytes for the same tensors and metadata, in any process;
    writer="safetensors" writes with the package (where it is installed and takes the dtypes,
    else with the module's writer), whose header orders the metadata differently from one process
    to the next. Every way reads back bit for bit."""
    import subprocess
    import sys
    import types
    import roundscope.dump as dump_module
    pytest.importorskip("safetensors")
    tensors = {"x": torch.randn(3, 5).to(torch.bfloat16), "y": torch.randn(4).to(torch.float8_e4m3fn),
               "s": torch.tensor([0.25, 1.0, 64.0]).to(torch.float8_e8m0fnu)}
    metadata = {"step": 1, "layer": 0, "source": "test", "torch_version": "x", "micro_batch": 0}
    assert dump_module.write_safetensors(tmp_path / "a.safetensors", tensors, metadata) == "roundscope"
    program = (f"import torch, roundscope.dump as d\nt = torch.load({str(tmp_path / 't.pt')!r})\n"
               f"d.write_safetensors({str(tmp_path / 'b.safetensors')!r}, t, {metadata!r})")
    torch.save(tensors, tmp_path / "t.pt")
    subprocess.run([sys.executable, "-c", program], check=True, env={**os.environ, "PYTHONHASHSEED": "7"})
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    assert dump_module.write_safetensors(tmp_path / "c.safetensors", tensors, metadata, "safetensors") == "safetensors"

    def refuses(*args, **kwargs):
        open(args[1], "wb").write(b"half a file")
        raise ValueError("dtype not supported")
    monkeypatch.setattr(dump_module, "_safetensors_torch", types.SimpleNamespace(save_file=refuses))
    assert dump_module.write_safetensors(tmp_path / "d.safetensors", tensors, metadata, "safetensors") == "roundscope"
    monkeypatch.setattr(dump_module, "_safetensors_torch", None)
    assert dump_module.write_safetensors(tmp_path / "e.safetensors", tensors, metadata, "safetensors") == "roundscope"
    written = ["a.safetensors", "b.safetensors", "c.safetensors", "d.safetensors", "e.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == written + ["t.pt"]  # no partial files
    for name in written:
        back = rs.read(tmp_path / name)
        assert rs.read_metadata(tmp_path / name) == {k: str(v) for k, v in metadata.items()}
        for n, t in tensors.items():
            assert back[n].tobytes() == raw_bytes(t), (name, n)
    with pytest.raises(ValueError, match="^writer: 'numpy' is not one of roundscope, safetensors"):
        dump_module.write_safetensors(tmp_path / "f.safetensors", tensors, metadata, "numpy")
    with pytest.raises(ValueError, match="^writer: "):
        AttentionDump(tmp_path, writer="numpy")


def test_a_users_file_beside_a_dump_is_never_written_over(tmp_path):
    """The writers write under names of their own (mkstemp), never NAME.partial: a user's file of
    that name stays as it was, and nothing is left behind."""
    import roundscope.llama_dumps as llama_dumps
    from roundscope.dump import AttentionDump

    for name in ("step0_layer0.safetensors.partial", ".step0_layer0.safetensors.partial", "run.json.partial"):
        (tmp_path / name).write_text("mine")
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    with AttentionDump(tmp_path).step(0):
        torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()
    llama_dumps._write_json(str(tmp_path / "run.json"), {"a": 1})
    assert all((tmp_path / n).read_text() == "mine" for n in ("step0_layer0.safetensors.partial",
                                                             ".step0_layer0.safetensors.partial", "run.json.partial"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".step0_layer0.safetensors.partial", "run.json", "run.json.partial", "step0_layer0.safetensors",
         "step0_layer0.safetensors.partial"])
    assert oct((tmp_path / "run.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    import os
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_step_stopped_half_way_writes_nothing(tmp_path):
    """An error (or Ctrl-C) inside the step, after the forward pass and before the backward: no
    forward-only dump is left to be taken for the whole step."""
    from roundscope.dump import AttentionDump

    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    dump = AttentionDump(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with dump.step(0):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
            raise KeyboardInterrupt
    assert dump.written == [] and list(tmp_path.iterdir()) == []
    assert torch.nn.functional.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"
