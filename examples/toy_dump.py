"""A two-layer toy transformer trained for four steps on the CPU in BF16, its attention captured
with python/roundscope/dump.py: the quickest way to a real dump to try roundscope on.

    .venv/bin/python examples/toy_dump.py [DIR]        # writes DIR/step3_layer{0,1}.safetensors
    build/roundscope inspect dumps/step3_layer0.safetensors

The text it learns is its own source, read as bytes (nothing is downloaded). d_model 64, 4 heads
(D = 16), context 128, batch 1: each file holds q, k, v, o and do, dq, dk, dv as [1, 4, 128, 16]
BF16.
"""
import argparse

import torch
import torch.nn.functional as F
from toy_transformer import ToyTransformer

from roundscope.dump import AttentionDump

CONTEXT, D_MODEL, HEADS, LAYERS, VOCAB = 128, 64, 4, 2, 256


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="?", default="dumps", help="where the dumps go (default: dumps)")
    out = p.parse_args().dir  # an option it does not know is refused (exit 2), not taken for DIR
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the same bits on every machine of the same kind
    text = torch.tensor(list(open(__file__, "rb").read()), dtype=torch.long)
    model = ToyTransformer(VOCAB, D_MODEL, HEADS, LAYERS).to(torch.bfloat16)
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
