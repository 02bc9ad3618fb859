"""Writes the ingest fuzzer's seeds (tests/fuzz/seeds/ingest): one small phase of each kind as the
kit writes it, in fuzz_ingest.py's document form. Phase A holds a probe capture cut to three tiles
of the H200's (tests/data/golden/h200/probe), phase C a flash capture of kit_inputs' inputs.

    PYTHONPATH=build/python .venv/bin/python tests/fuzz/write_ingest_seeds.py
"""
import base64
import hashlib
import json
import pathlib
import subprocess
import tempfile

import torch
from safetensors.numpy import load_file, save
from safetensors.torch import save as save_torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fuzz" / "seeds" / "ingest"


def b64(data: bytes) -> dict:
    return {"base64": base64.b64encode(data).decode()}


def phase(name, members, **summary):
    archive = f"{name}-data.tar.xz"
    return {"summary": {"schema": 1, "phase": name, "dry_run": False, "kit": {"commit": "seed", "bytes": 1},
                        "archives": [{"archive": archive, "sha256": "="}],
                        "steps": [{"name": "seed", "status": "ok", "rc": 0, "timeout_s": 10, "seconds": 1.0}],
                        **summary},
            "archives": {archive: members}}


def probe_capture() -> bytes:
    path = ROOT / "tests/data/golden/h200/probe/mma_fp16_acc_f16.safetensors"
    tensors = load_file(path)
    raw = path.read_bytes()
    meta = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])["__metadata__"]
    keep = [0, 8, 16]  # one tile of each of the first three distributions
    small = {k: tensors[k][keep] for k in ("A", "B", "C", "D", "dist")}
    return save(small, metadata={**meta, "capture_tiles": "3"})


def flash_capture(backward=False) -> bytes:
    """A flash forward capture (o, lse) of one head of 4 tokens at D 2, or its backward (dq, dk, dv)."""
    with tempfile.TemporaryDirectory() as tmp:
        inputs = pathlib.Path(tmp) / "inputs.safetensors"
        subprocess.run([ROOT / "build/tools/gpu/kit_inputs", "--scenario", "random", "--heads", "1", "--n", "4",
                        "--d", "2", "--seed", "7", "-o", inputs], check=True)
        sha = hashlib.sha256(inputs.read_bytes()).hexdigest()
    o = torch.tensor([[[0.25, -0.5], [0.125, 1.0], [-0.75, 0.5], [0.0, 0.375]]], dtype=torch.bfloat16)
    tensors = {f"flash.bf16.random.full.{g}": o.flip(1) for g in ("dq", "dk", "dv")} if backward else \
        {"flash.bf16.random.full.o": o, "flash.bf16.random.full.lse": torch.zeros(1, 4)}
    return save_torch(tensors,
                      metadata={"bhnd": "[1, 1, 4, 2]", "input_sha256": json.dumps({"random": sha}), "shape": "S1",
                                "softmax_scale": "0.7071067811865476"})


def main():
    SEEDS.mkdir(parents=True, exist_ok=True)
    seeds = {
        "phase_a": phase("A", {"logs/probe.log": "probe ok\n", "probe/mma_fp16_acc_f16.safetensors":
                               b64(probe_capture())}),
        "phase_b": phase("B", {"sweep/sweep.jsonl": '{"preset": "fa2-bf16", "exact": true}\n'
                               '{"preset": "fa3-fp8", "runnable": false, "why": "no wgmma"}\n',
                               "bench/bench.jsonl": '{"kernel": "ours", "ms": 1.5}\n'}),
        "phase_c": phase("C", {"sdpa/sdpa_cases.json": json.dumps([
            {"pass": "forward", "shape": "S1", "backend": "flash", "dtype": "bf16", "causal": False,
             "kernels": ["void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>(Flash_fwd_params)"]}]),
            "sdpa/sdpa_S1_bf16_fwd.safetensors": b64(flash_capture()),
            "sdpa/sdpa_S1_bf16_bwd.safetensors": b64(flash_capture(backward=True))}),
    }
    for name, doc in seeds.items():
        (SEEDS / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
