"""A two-layer toy transformer trained for four steps on the CPU in BF16, its attention captured
with python/roundscope/dump.py: the quickest way to a real dump to try roundscope on.

    .venv/bin/python examples/toy_dump.py [DIR]        # writes DIR/step3_layer{0,1}.safetensors
    build/roundscope inspect dumps/step3_layer0.safetensors

The text it learns is its own source, read as bytes (nothing is downloaded). d_model 64, 4 heads
(D = 16), context 128, batch 1: each file holds q, k, v, o, do as [1, 4, 128, 16] BF16.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from roundscope.dump import AttentionDump

CONTEXT, D_MODEL, HEADS, LAYERS, VOCAB = 128, 64, 4, 2, 256


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.proj = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # what the dump captures
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "dumps"
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the same bits on every machine of the same kind
    text = torch.tensor(list(open(__file__, "rb").read()), dtype=torch.long)
    model = Toy().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dump = AttentionDump(out, layers=list(range(LAYERS)), steps=[3])
    for step in range(4):
        start = step * CONTEXT
        tokens = text[start : start + CONTEXT + 1].unsqueeze(0)
        with dump.step(step):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")
    for path in dump.written:
        print("wrote", path)


if __name__ == "__main__":
    main()
