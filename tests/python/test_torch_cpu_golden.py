"""PyTorch's CPU attention as captured on a CPU of each GEMM the recipe models
(tests/data/golden/cpu, tools/torch_cpu_capture.py): the recipe with the settings a capture names
reproduces its O and LSE bit for bit on any machine, and the other GEMM's products do not, so a
CPU that lacks the captured one still checks its model. The peer test on the CPU itself:
tests/peer/test_aten_cpu_torch.py."""
import pathlib

import pytest

import roundscope as rs
from conftest import ROOT

CAPTURES = sorted((ROOT / "tests" / "data" / "golden" / "cpu").glob("*/*.safetensors"))
# each capture's negative control: another CPU's products
OTHER = {"avx512-bf16": {"score_product": "amx", "pv_product": "amx", "aten_threads": "2"},
         "mkl-avx2": {"score_product": "avx512-bf16", "pv_product": "avx512-bf16"}}


def _settings(path: pathlib.Path) -> dict:
    return dict(kv.split("=", 1) for kv in rs.read_metadata(path)["settings"].split(","))


def test_there_are_captures_of_each_gemm():
    assert {p.parent.name for p in CAPTURES} >= {"avx512-bf16", "mkl-avx2"}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_recipe_reproduces_the_capture_bit_for_bit(path):
    meta = rs.read_metadata(path)
    r = rs.compare(path, meta["recipe"], settings=_settings(path))
    held = rs.read(path)
    assert set(r["outputs"]) >= {"o", "lse", "dq", "dk", "dv"} & set(held) and "o" in r["outputs"]
    for name in r["outputs"]:
        out = r["outputs"][name]
        assert out["matched"] == out["total"], f"{name}: {out['total'] - out['matched']} of {out['total']} differ"


# one query: the AMX recipe refuses the GEMV's shapes (tests/peer/test_aten_cpu_torch.py)
GEMV = {"decode"}


@pytest.mark.parametrize("path", [p for p in CAPTURES if p.parent.name in OTHER and p.stem not in GEMV],
                         ids=lambda p: p.stem)
def test_the_other_gemm_does_not(path):
    """A negative control: the capture tells the GEMMs apart (FP16, float32 and the math path, which
    no other CPU's GEMM takes, from the exact products rounded once)."""
    meta = rs.read_metadata(path)
    exact = _settings(path).get("input") in ("f16", "f32") or meta["recipe"] == "torch-cpu-math"
    other = {**_settings(path), "score_product": "f64", "pv_product": "f64"} if exact else OTHER[path.parent.name]
    r = rs.compare(path, meta["recipe"], settings=other)
    assert sum(r["outputs"][n]["total"] - r["outputs"][n]["matched"] for n in r["outputs"]) > 0


@pytest.mark.parametrize("name", ["fp16-odd-tail", "fp32-odd-tail"])
def test_fit_finds_the_fp16_and_fp32_recipes_from_the_generic_presets(name):
    """`fit`, from every preset but torch-cpu-bf16 and on 32 rows a head, rediscovers the FP16 and
    float32 recipes from the AMD captures (833 keys: two KV blocks of 512 and 321), on any machine."""
    path = ROOT / "tests" / "data" / "golden" / "cpu" / "mkl-avx2" / f"{name}.safetensors"
    presets = [r["name"] for r in rs.recipes()["recipes"] if r["name"] != "torch-cpu-bf16"]
    r = rs.fit(path, presets=presets, rows=32, explain_rows=0)
    assert r["exact"], r["best"]
    table = {x["name"]: x["settings"] for x in rs.recipes()["recipes"]}
    found = {**table[r["best"]["preset"]], **{k: str(v) for k, v in r["best"]["settings"].items()}}
    want = {"softmax": "aten-cpu", "score_product": "mkl-avx2", "pv_product": "mkl-avx2", "block_n": "512",
            **{k: v for k, v in _settings(path).items() if k in ("input", "p_format", "o_format")}}
    assert {k: found[k] for k in want} == want, r["best"]


def test_fit_finds_the_math_path_from_the_generic_presets():
    """`fit`, from every preset but torch-cpu-math, rediscovers PyTorch's CPU math path from its
    float32 capture's O (V's head dimension not Q's): the CPU's softmax and MKL's SGEMM, on any
    machine. (Its gradients hold the recipe itself: test_the_recipe_reproduces_the_capture_bit_for_bit.)"""
    path = ROOT / "tests" / "data" / "golden" / "cpu" / "mkl-avx2" / "math-fp32.safetensors"
    presets = [r["name"] for r in rs.recipes()["recipes"] if r["name"] != "torch-cpu-math"]
    r = rs.fit(path, presets=presets, outputs=["o"], rows=32, explain_rows=0)
    assert r["exact"], r["best"]
    table = {x["name"]: x["settings"] for x in rs.recipes()["recipes"]}
    found = {**table[r["best"]["preset"]], **{k: str(v) for k, v in r["best"]["settings"].items()}}
    want = {"softmax": "aten-cpu-math", "score_product": "mkl-avx2", "pv_product": "mkl-avx2"}
    assert {k: found[k] for k in want} == want, r["best"]


def test_fit_says_which_best_has_no_backward():
    """On a capture with gradients, the sampled search scores o and lse only; where its best has no
    backward (here fa2-f32's exact gradient products under the math path), fit names that recipe and
    why, and how to fit the forward alone, rather than another recipe's refusal."""
    path = ROOT / "tests" / "data" / "golden" / "cpu" / "mkl-avx2" / "math-fp32.safetensors"
    presets = [r["name"] for r in rs.recipes()["recipes"] if r["name"] != "torch-cpu-math"]
    with pytest.raises(ValueError, match=r"the best on the sampled rows \(recipe fa2-f32 .*softmax=aten-cpu-math.*\) "
                                         r"refused: .*backward.*score the outputs o and lse only"):
        rs.fit(path, presets=presets, rows=32, explain_rows=0)
