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


def test_bias_decomposition_terms_add_up_to_the_bias(tmp_path):
    """Each stage's term is a difference of two runs: the terms and the rest add up to the bias as
    is, and in the tied pair's regime the l term is there (the BF16 row sum 2 + e rounded to 2)."""
    import json
    p = subprocess.run([sys.executable, ROOT / "examples" / "bias_decomposition.py", "--steps", "2", "--n", "128",
                        "--gaps", "12", "--betas", "2", "4", "--beta-gaps", "12", "--threads", "2", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    tables = json.loads(p.stdout)
    assert len(tables) == 5 and [len(t["rows"]) for t in tables] == [1, 1, 1, 1, 2], tables
    for t in tables:
        for row in t["rows"]:
            terms = [row[k]["sum"] for k in ("P-bar V and O", "l", "S and m", "P cast", "rest")]
            assert abs(sum(terms) - row["as is"]["sum"]) <= 1e-9 * (1 + abs(row["as is"]["sum"])), (t["title"], row)
    pair = tables[0]["rows"][0]
    assert pair["as is"]["positive_steps"] == 2 and pair["l"]["sum"] > 1, pair
    assert abs(pair["rest"]["sum"]) < 1e-2, "every stage float32 leaves no bias"
    bad = subprocess.run([sys.executable, ROOT / "examples" / "bias_decomposition.py", "--steps", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--steps" in bad.stderr
