"""roundscope.dump on a two-layer toy transformer trained on the CPU: the files it writes hold
exactly the q, k, v, o and do (and dq, dk, dv) that PyTorch computed, bit for bit, with the
metadata roundscope reads, and `roundscope inspect` reads them and agrees; FP8 kernels with
descale factors and functions taking their options positionally are recorded as called."""
import math
import sys
import zlib
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

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


@pytest.mark.parametrize("names, causal", [(("mask", "causal", "q_bucket_size", "k_bucket_size"), "true"), ((), "false")])
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
