"""The quick examples run as their docstrings say: examples/toy_dump.py writes a dump per layer that
`roundscope inspect` reads, and examples/train_emulated.py trains every run for a few steps."""
import subprocess
import sys

import pytest

from conftest import ROOT


def test_toy_dump_writes_a_dump_per_layer(cli, tmp_path):
    p = subprocess.run([sys.executable, ROOT / "examples" / "toy_dump.py", tmp_path / "dumps"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    for layer in (0, 1):
        inspected = cli.json("inspect", tmp_path / "dumps" / f"step3_layer{layer}.safetensors")
        tensors = {t["name"]: t for t in inspected["tensors"]}
        assert set(tensors) == {"q", "k", "v", "o", "do", "dq", "dk", "dv"}
        assert all(t["dtype"] == "bf16" and t["shape"] == [1, 4, 128, 16] for t in tensors.values()), tensors


def test_toy_dump_takes_no_option_for_a_folder(tmp_path):
    """`--help` prints the usage and an unknown option is refused: neither becomes a folder."""
    for args, rc in ((["--help"], 0), (["--out", "x"], 2), (["a", "b"], 2)):
        p = subprocess.run([sys.executable, ROOT / "examples" / "toy_dump.py", *args], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
        assert p.returncode == rc and "Traceback" not in p.stderr, (args, p.stderr)
        assert list(tmp_path.iterdir()) == [], args


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


def decomposition(recipe, n, steps):
    import json
    p = subprocess.run([sys.executable, ROOT / "examples" / "bias_decomposition.py", "--recipe", recipe, "--steps",
                        str(steps), "--n", str(n), "--gaps", "12", "--betas", "2", "--beta-gaps", "12", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    return json.loads(p.stdout)


def assert_terms_add_up(tables, stages):
    for t in tables:
        for row in t["rows"]:
            terms = [row[k]["sum"] for k in (*stages, "rest")]
            assert abs(sum(terms) - row["as is"]["sum"]) <= 1e-9 * (1 + abs(row["as is"]["sum"])), (t["title"], row)


def test_bias_decomposition_of_the_compiled_code_has_an_l_stage_past_one_bucket_only(tmp_path):
    """Under torch.compile the row sum stays in float32 within one 512-key bucket: the compiled
    recipe's decomposition has no l term there, its terms still add up, and its bias differs from
    the eager code's. Past one bucket O's division reloads the BF16 row sums, and the l term is
    back (and not zero)."""
    compiled, eager = decomposition("fa2-bf16-torch-compiled", 128, 2), decomposition("fa2-bf16-torch", 128, 2)
    assert all("l" not in row for t in compiled for row in t["rows"])
    assert_terms_add_up(compiled, ("P-bar V and O", "S and m", "P cast"))
    assert compiled[0]["title"].startswith("fa2-bf16-torch-compiled")
    assert compiled[0]["rows"][0]["as is"]["sum"] != eager[0]["rows"][0]["as is"]["sum"]
    two_buckets = decomposition("fa2-bf16-torch-compiled", 1024, 2)
    assert_terms_add_up(two_buckets, ("P-bar V and O", "l", "S and m", "P cast"))
    assert any(row["l"]["sum"] != 0 for t in two_buckets for row in t["rows"])


def test_train_leak_quantizes_v_as_the_mx_quantizer_and_logs_both_arms(tmp_path):
    """examples/train_leak.py's MXFP4 V along tokens is roundscope's MX quantizer bit for bit (a
    partial last block included); its fixed attention sees no later token; a short run logs both
    arms' parallel and autoregressive losses and a verdict."""
    import json
    import numpy as np
    import torch
    import roundscope as rs
    sys.path.insert(0, str(ROOT / "examples"))
    import train_leak
    g = torch.Generator().manual_seed(0)
    v = torch.randn(2, 3, 100, 16, generator=g) * torch.exp2(torch.randint(-20, 20, (2, 3, 1, 16), generator=g).float())
    v[0, 0, :32, 0] = 0
    ours = train_leak.mxfp4_along_tokens(v)
    ref = torch.from_numpy(np.asarray(rs.mx.dequantize(rs.mx.quantize(v.numpy(), "mxfp4", axis=-2))))
    assert torch.equal(ours.view(torch.int32), ref.view(torch.int32))
    q, k, v = (torch.randn(1, 2, 64, 16, generator=g) for _ in range(3))
    later = v.clone()
    later[:, :, 40] *= 16  # token 40 moves the scale of block 32..63
    for attention, leaks in ((train_leak.leaky_attention, True), (train_leak.fixed_attention, False)):
        moved = (attention(q, k, v) - attention(q, k, later))[:, :, 32:40].abs().max().item()
        assert (moved > 0) == leaks, (attention.__name__, moved)
    p = subprocess.run([sys.executable, ROOT / "examples" / "train_leak.py", "--steps", "4", "--eval-every", "3",
                        "--eval-sequences", "2", "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-1000:]
    r = json.loads(p.stdout)
    assert [row["step"] for row in r["log"]] == [3, 4]  # every 3 steps and the last
    assert set(r["log"][-1]) >= {"leaky", "fixed"}
    assert r["verdict"].split(":")[0] in {"exploited", "not exploited", "undecided"}, r["verdict"]
    assert abs(r["leaky_parallel_emulated"] - r["log"][-1]["leaky"]["parallel"]) < 0.05


def test_grad_quant_errors_tabulates_every_setting(tmp_path):
    """examples/grad_quant_errors.py on a small causal BF16 head: a row per setting, the unquantized
    gradients within 1 % of the exact ones with a slope of 1, MXFP4's far from them; a file
    without dO is refused with exit 2."""
    import torch
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 2, 64, 32, generator=g).bfloat16() for _ in range(4))
    save_file({"q": q, "k": k, "v": v, "do": do}, tmp_path / "head.safetensors", metadata={"causal": "true"})
    p = subprocess.run([sys.executable, ROOT / "examples" / "grad_quant_errors.py", tmp_path / "head.safetensors",
                        "--seeds", "2", "--threads", "2"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in p.stdout.splitlines()[2:]]
    assert [r[:2] for r in rows] == [["none", "nearest"], ["mxfp8_e4m3", "nearest"],
                                     ["mxfp8_e4m3", "stochastic (one seed; mean of 2)"], ["mxfp4", "nearest"],
                                     ["mxfp4", "stochastic (one seed; mean of 2)"]], p.stdout
    assert all(float(x) < 0.01 for x in rows[0][2::2]) and all(abs(float(x) - 1) < 0.01 for x in rows[0][3::2])
    assert all(float(x) > 0.05 for x in rows[3][2::2]), rows[3]
    save_file({"q": q, "k": k, "v": v}, tmp_path / "no_do.safetensors")
    bad = subprocess.run([sys.executable, ROOT / "examples" / "grad_quant_errors.py", tmp_path / "no_do.safetensors"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "'do'" in bad.stderr, bad.stderr


@pytest.mark.parametrize("case", ["corrupt", "shapes", "recipe", "threads", "seeds"])
def test_grad_quant_errors_refuses_bad_input_in_one_line(tmp_path, case):
    """A corrupt file, tensors whose shapes do not fit, an unknown recipe, a thread count out of
    range, no seeds: exit 2 with one line naming what is wrong, before any work."""
    import torch
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 1, 16, 8, generator=g).bfloat16() for _ in range(4))
    good = tmp_path / "head.safetensors"
    save_file({"q": q, "k": k, "v": v, "do": do}, good)
    path, args, says = good, [], ""
    if case == "corrupt":
        path = tmp_path / "corrupt.safetensors"
        path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
        says = "truncated"
    elif case == "shapes":
        path = tmp_path / "shapes.safetensors"
        save_file({"q": q, "k": k[:, :, :5].contiguous(), "v": v, "do": do}, path)
        says = "shape"
    elif case == "recipe":
        args, says = ["--recipe", "nope"], "--recipe"
    elif case == "threads":
        args, says = ["--threads", "-3"], "--threads"
    else:
        args, says = ["--seeds", "0"], "--seeds"
    p = subprocess.run([sys.executable, ROOT / "examples" / "grad_quant_errors.py", path, *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
