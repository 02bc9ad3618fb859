"""The quick examples run as their docstrings say: examples/toy_dump.py writes a dump per layer that
`roundscope inspect` reads, and examples/train_emulated.py trains every run for a few steps."""
import subprocess
import sys

from conftest import ROOT


def test_toy_dump_writes_a_dump_per_layer(cli, tmp_path):
    p = subprocess.run([sys.executable, ROOT / "examples" / "toy_dump.py", tmp_path / "dumps"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    for layer in (0, 1):
        tensors = {t["name"]: t for t in cli.json("inspect", tmp_path / "dumps" / f"step3_layer{layer}.safetensors")["tensors"]}
        assert set(tensors) == {"q", "k", "v", "o", "do", "dq", "dk", "dv"}
        assert all(t["dtype"] == "bf16" and t["shape"] == [1, 4, 128, 16] for t in tensors.values()), tensors


def test_train_emulated_trains_every_run(tmp_path):
    p = subprocess.run([sys.executable, ROOT / "examples" / "train_emulated.py", "--steps", "3", "--threads", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    rows = [line.split() for line in p.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["0", "1", "2"] and all(len(r) == 1 + 2 * 3 for r in rows), p.stdout
    assert "3 steps of 3 runs" in p.stderr
