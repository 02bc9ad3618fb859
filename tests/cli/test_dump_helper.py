"""python/roundscope/dump.py on a two-layer toy transformer, trained on the CPU: the files
it writes hold exactly the q, k, v, o and do that PyTorch computed (bit for bit), with the
metadata roundscope reads, and `roundscope inspect` reads them and agrees.

Usage: test_dump_helper.py PATH/TO/roundscope   (with torch and numpy)
"""
import json
import math
import os
import struct
import sys
import tempfile
import zlib
from fractions import Fraction

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
from cli_harness import check, finish, read_safetensors, run  # noqa: E402
from roundscope.dump import AttentionDump  # noqa: E402

BINARY = sys.argv[1]
OUT = tempfile.mkdtemp(prefix="roundscope-dump-")
torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.kept = {}  # step -> (q, k, v, o): the test's own record of what PyTorch computed
        self.step = None

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        for t in (q, k, v, o):
            t.retain_grad()
        self.kept[self.step] = (q, k, v, o)
        return self.proj(o.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Toy(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


model = Toy().to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dump = AttentionDump(OUT, layers=[0, 1], steps=[1])
for step in range(3):
    for block in model.blocks:
        block.attn.step = step
    tokens = torch.randint(0, 64, (2, 16))
    with dump.step(step):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, 64), tokens[:, 1:].reshape(-1))
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def raw_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


expected_files = sorted(os.path.join(OUT, f"step1_layer{layer}.safetensors") for layer in (0, 1))
check("one file per chosen layer and step", sorted(dump.written) == expected_files and
      sorted(os.listdir(OUT)) == [os.path.basename(p) for p in expected_files], os.listdir(OUT))
for layer in (0, 1):
    path = os.path.join(OUT, f"step1_layer{layer}.safetensors")
    q, k, v, o = model.blocks[layer].attn.kept[1]
    reference = {"q": q, "k": k, "v": v, "o": o, "do": o.grad, "dq": q.grad, "dk": k.grad, "dv": v.grad}
    check(f"layer {layer} do, dq, dk, dv exist", all(t.grad is not None for t in (q, k, v, o)))
    tensors, metadata = read_safetensors(path)
    check(f"layer {layer} names", set(tensors) == set(reference), sorted(tensors))
    for name, t in reference.items():
        dtype, shape, data = tensors.get(name, (None, None, b""))
        check(f"layer {layer} {name} dtype", dtype == "BF16", dtype)
        check(f"layer {layer} {name} shape", shape == list(t.shape), shape)
        check(f"layer {layer} {name} bits", data == raw_bytes(t), f"{len(data)} bytes")
    check(f"layer {layer} metadata", metadata.get("layer") == str(layer) and metadata.get("step") == "1" and
          metadata.get("causal") == "true" and float(metadata.get("softmax_scale", 0)) == 1 / math.sqrt(8), metadata)

    # roundscope reads the same file: same bits (CRC-32) and the exact mean of what PyTorch computed.
    rc, out, err = run(BINARY, "inspect", path, "--json", "--checksum")
    check(f"layer {layer} inspect exit", rc == 0, err)
    if rc != 0:
        continue
    doc = json.loads(out)
    got = {t["name"]: t for t in doc["tensors"]}
    check(f"layer {layer} inspect metadata", doc.get("metadata", {}).get("causal") == "true", doc.get("metadata"))
    for name, t in reference.items():
        g = got.get(name, {})
        values = [Fraction(x) for x in t.detach().float().reshape(-1).tolist()]
        mean = float(sum(values, Fraction(0)) / len(values))
        check(f"layer {layer} {name} crc32", g.get("crc32") == zlib.crc32(raw_bytes(t)), g.get("crc32"))
        check(f"layer {layer} {name} inspect dtype/shape", g.get("dtype") == "bf16" and g.get("shape") == list(t.shape), g)
        check(f"layer {layer} {name} inspect mean", g.get("mean") == mean, f"{g.get('mean')!r} vs {mean!r}")
        check(f"layer {layer} {name} inspect min/max", g.get("min") == float(min(values)) and g.get("max") == float(max(values)))

# An FP8 kernel with descale factors, wrapped: FP8 inputs kept as FP8, the factors saved, the
# SDPA call inside it not counted as a layer.
def fp8_attention(q8, k8, v8, descale_q=None, descale_k=None, descale_v=None, causal=False):
    q, k, v = q8.float() * descale_q, k8.float() * descale_k, v8.float() * descale_v
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).to(torch.bfloat16)


fp8_dir = os.path.join(OUT, "fp8")
dump8 = AttentionDump(fp8_dir)
attention8 = dump8.wrap(fp8_attention)
x = torch.randn(1, 2, 8, 16)
scales = {n: torch.tensor(x.abs().max().item() / 448.0) for n in ("q", "k", "v")}
inputs = {n: (x / scales[n]).to(torch.float8_e4m3fn) for n in scales}
with dump8.step(7):
    attention8(inputs["q"], inputs["k"], inputs["v"], descale_q=scales["q"], descale_k=scales["k"],
               descale_v=scales["v"], causal=True)
check("fp8 one file", os.listdir(fp8_dir) == ["step7_layer0.safetensors"], os.listdir(fp8_dir))
path = os.path.join(fp8_dir, "step7_layer0.safetensors")
tensors, metadata = read_safetensors(path)
check("fp8 dtypes", all(tensors[n][0] == "F8_E4M3" for n in ("q", "k", "v")) and tensors["o"][0] == "BF16",
      {n: tensors[n][0] for n in tensors})
check("fp8 bits", all(tensors[n][2] == raw_bytes(inputs[n]) for n in ("q", "k", "v")))
check("fp8 descale metadata", float(metadata.get("descale_q", 0)) == scales["q"].item() and metadata.get("causal") == "true",
      metadata)
rc, out, err = run(BINARY, "inspect", path, "--json", "--checksum")
got = {t["name"]: t for t in json.loads(out)["tensors"]} if rc == 0 else {}
check("fp8 inspect", rc == 0 and got["q"]["dtype"] == "e4m3" and got["q"]["crc32"] == zlib.crc32(raw_bytes(inputs["q"])), err)

# A custom Function taking its options positionally, as the BF16-bias paper's code calls it
# (FlashAttentionFunction.apply(q, k, v, None, True, 512, 512)): named by `positional`, causal
# is recorded; unnamed, it would be lost.
def positional_attention(q, k, v, mask, causal, q_bucket, k_bucket):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


for names, want in ((("mask", "causal", "q_bucket_size", "k_bucket_size"), "true"), ((), "false")):
    pos_dir = os.path.join(OUT, f"positional{len(names)}")
    dump_p = AttentionDump(pos_dir)
    attention_p = dump_p.wrap(positional_attention, positional=names)
    with dump_p.step(0):
        attention_p(x, x, x, None, True, 512, 512)
    _, metadata = read_safetensors(os.path.join(pos_dir, "step0_layer0.safetensors"))
    check(f"positional options {names or 'unnamed'}: causal {want}", metadata.get("causal") == want, metadata)

finish("test_dump_helper")
