"""The toy transformer the examples and the dump helper's test train: pre-norm blocks of causal
self-attention and a GELU MLP over a byte vocabulary. Attention is `attention(q, k, v,
is_causal=True)` on [B, H, N, D]; by default torch.nn.functional.scaled_dot_product_attention,
looked up at each call, so that roundscope.dump sees every call."""
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, heads, attention=None):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = (self.attention or F.scaled_dot_product_attention)(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class ToyTransformer(nn.Module):
    def __init__(self, vocab=256, d_model=64, heads=4, layers=2, attention=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, attention) for _ in range(layers))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
