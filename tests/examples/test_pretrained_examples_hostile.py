"""Hostile input to the head-by-head examples (examples/pretrained_bias.py,
examples/pretrained_pcollapse.py), as the CLI's hostile suite attacks the CLI: a bad option or a
dump a head alone would misread stops them with one line and exit 2 before any work (no cache
folder made, no file changed); a cache entry that is not this very dump's result (garbage,
another dump's, a FIFO, a link) is measured again and replaced, never believed, never followed."""
import hashlib
import importlib
import json
import os
import sys

import numpy as np
import pytest

import roundscope as rs
from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples"))
bias_example = importlib.import_module("pretrained_bias")
pcollapse_example = importlib.import_module("pretrained_pcollapse")

META = {"causal": "true", "causal_alignment": "top-left", "softmax_scale": "0.25", "layer": "0", "step": "0",
        "enable_gqa": "true", "gqa_group": "2"}


def write_dump(path, tensors=None, **meta):
    rng = np.random.default_rng(len(str(path)))
    x = {"q": rng.standard_normal((1, 4, 32, 16)), "k": rng.standard_normal((1, 2, 32, 16)),
         "v": rng.standard_normal((1, 2, 32, 16)), "do": rng.standard_normal((1, 4, 32, 16))}
    x = {n: t.astype(np.float32) for n, t in x.items()}
    x["q"][..., 0] += 4  # a sink: the first key's score stands out
    x["k"][:, :, 0] *= 3
    rs.write(path, {**x, **(tensors or {})}, {k: v for k, v in {**META, **meta}.items() if v is not None})


@pytest.fixture
def dumps(tmp_path):
    (tmp_path / "dumps" / "text").mkdir(parents=True)
    for layer in (0, 1):
        write_dump(tmp_path / "dumps" / "text" / f"step0_layer{layer}.safetensors", layer=str(layer))
    return tmp_path / "dumps"


def digest(folder):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_fifo() else None
            for p in sorted(folder.rglob("*"))}


def refused(example, argv, capsys, phrase, folder):
    before = digest(folder)
    assert example.main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and phrase in err, err
    assert digest(folder) == before


@pytest.mark.parametrize("example", [bias_example, pcollapse_example], ids=["bias", "pcollapse"])
@pytest.mark.parametrize("args, phrase", [
    (["--recipe", "nope"], "--recipe: unknown recipe 'nope'"),
    (["--recipe", "../../escaped"], "--recipe: unknown recipe '../../escaped'"),
    (["--threads", "0"], "--threads: at least 1"),
])
def test_a_bad_option_is_refused_before_any_work(example, args, phrase, dumps, capsys):
    refused(example, [dumps, *args], capsys, phrase, dumps.parent)


@pytest.mark.parametrize("example", [bias_example, pcollapse_example], ids=["bias", "pcollapse"])
@pytest.mark.parametrize("tensors, meta, phrase", [
    ({"attn_mask": np.ones((1, 1, 1, 32), bool)}, {}, "holds attn_mask, which the head-by-head split would drop"),
    ({"bias": np.zeros((1, 1, 32, 32), np.float32)}, {}, "holds bias"),
    ({}, {"window_left": "4"}, "metadata window_left = '4'"),
    ({}, {"softcap": "30"}, "metadata softcap = '30'"),
    ({}, {"dropout_p": "0.1"}, "metadata dropout_p = '0.1'"),
    ({}, {"q_descale": "2"}, "metadata 'q_descale' is not known"),
    ({}, {"gqa_group": "3"}, "metadata gqa_group '3' does not fit"),
    ({}, {"causal": "maybe"}, "metadata causal is 'maybe'"),
    ({}, {"softmax_scale": "nan"}, "metadata softmax_scale is 'nan'"),
    ({}, {"softmax_scale": None}, "metadata softmax_scale is None"),
])
def test_a_dump_a_head_alone_would_misread_is_refused(example, tensors, meta, phrase, dumps, capsys):
    write_dump(dumps / "text" / "step0_layer1.safetensors", tensors, **meta)
    refused(example, [dumps], capsys, phrase, dumps.parent)


@pytest.mark.parametrize("example", [bias_example, pcollapse_example], ids=["bias", "pcollapse"])
def test_a_corrupt_dump_is_refused_in_one_line(example, dumps, capsys):
    path = dumps / "text" / "step0_layer1.safetensors"
    path.write_bytes(path.read_bytes()[:200])
    refused(example, [dumps], capsys, "step0_layer1.safetensors", dumps.parent)


def test_a_dump_not_named_as_llama_dumps_names_it_is_refused(dumps, capsys):
    write_dump(dumps / "text" / "step0_layerX.safetensors")
    refused(bias_example, [dumps], capsys, "not a llama_dumps file name", dumps.parent)


@pytest.mark.parametrize("target", ["dump", "folder", "missing folder", "cache entry"])
def test_json_that_is_an_input_or_cannot_be_written_is_refused(target, dumps, capsys):
    json_at = {"dump": dumps / "text" / "step0_layer0.safetensors", "folder": dumps,
               "missing folder": dumps / "no" / "out.json",
               "cache entry": dumps / "bias-fa2-bf16-torch-compiled" / "text_step0_layer0.json"}[target]
    phrase = {"dump": "is one of the inputs", "folder": "is a folder", "missing folder": "no such folder",
              "cache entry": "is one of the inputs"}[target]
    refused(bias_example, [dumps, "--json", json_at], capsys, phrase, dumps.parent)


def cache_of(example, dumps):
    return dumps / ("bias-fa2-bf16-torch-compiled" if example is bias_example else "pcollapse")


@pytest.mark.parametrize("example", [bias_example, pcollapse_example], ids=["bias", "pcollapse"])
def test_a_cache_entry_that_is_not_this_dumps_result_is_measured_again(example, dumps, capsys, tmp_path):
    def told(read, again):
        return f"{read} of 2 dumps read from {cache_of(example, dumps)}, {again} measured again (entries not this " \
            "dump's result)\n"
    assert example.main([str(dumps), "--threads", "1"]) == 0
    first, err = capsys.readouterr()
    assert err == told(0, 0)
    entries = sorted(cache_of(example, dumps).iterdir())
    assert len(entries) == 2
    assert example.main([str(dumps), "--threads", "1"]) == 0
    assert capsys.readouterr() == (first, told(2, 0))

    outside = tmp_path / "outside.json"
    outside.write_text("keep me")
    good = entries[1].read_bytes()
    entries[0].write_bytes(good)  # the other dump's result: its key names the other dump's bytes
    entries[1].unlink()
    entries[1].symlink_to(outside)  # a link is replaced, never followed
    assert example.main([str(dumps), "--threads", "1"]) == 0
    assert capsys.readouterr() == (first, told(0, 2))
    assert outside.read_text() == "keep me" and not entries[1].is_symlink()

    for poison in (b"", b"{}", b"[]", b"\xff\xfe", good[:-10], good.replace(b'"result"', b'"resulx"')):
        entries[0].write_bytes(poison)
        assert example.main([str(dumps), "--threads", "1"]) == 0
        assert capsys.readouterr() == (first, told(1, 1)), poison
    entries[0].unlink()
    os.mkfifo(entries[0])  # never opened for a wait
    assert example.main([str(dumps), "--threads", "1"]) == 0
    assert capsys.readouterr() == (first, told(1, 1)) and entries[0].is_file()


def test_an_edited_result_is_not_believed(dumps, capsys):
    """The entry's digest covers its result: a number changed in place is measured again."""
    assert bias_example.main([str(dumps), "--threads", "1"]) == 0
    first = capsys.readouterr()[0]
    entry = sorted(cache_of(bias_example, dumps).iterdir())[0]
    text = entry.read_text()
    edited = text.replace('"rows": 32', '"rows": 33', 1)
    assert edited != text
    entry.write_text(edited)
    assert bias_example.main([str(dumps), "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert out == first and "1 measured again" in err


def test_a_folder_where_a_cache_entry_belongs_is_refused(dumps, capsys):
    (cache_of(bias_example, dumps) / "text_step0_layer0.json").mkdir(parents=True)
    refused(bias_example, [dumps, "--threads", "1"], capsys, "a folder where a cache entry belongs", dumps.parent)


def test_two_dumps_that_would_share_a_cache_entry_are_refused(dumps, capsys):
    (dumps / "a").mkdir()
    (dumps / "a_b").mkdir()
    write_dump(dumps / "a" / "b_c.safetensors")
    write_dump(dumps / "a_b" / "c.safetensors")
    refused(pcollapse_example, [dumps], capsys, "both would be cached as", dumps.parent)


def test_a_dump_changed_while_measured_is_not_filed_under_its_old_bytes(dumps):
    result_cache = importlib.import_module("result_cache")
    dump = dumps / "text" / "step0_layer0.safetensors"
    entry = dumps / "entry.json"

    def compute():
        write_dump(dump, softmax_scale="0.5")  # rewritten during the measurement
        return {"rows": 1}
    with pytest.raises(result_cache.Refused, match="changed while it was measured"):
        result_cache.cached(str(entry), str(dump), "test", "fa2-bf16", compute)
    assert not entry.exists()
    assert result_cache.cached(str(entry), str(dump), "test", "fa2-bf16", lambda: {"rows": 2}) == ({"rows": 2}, "new")
    assert result_cache.cached(str(entry), str(dump), "test", "fa2-bf16", lambda: {"rows": 3}) == ({"rows": 2}, "read")


def test_a_wide_p_recipe_is_measured_in_both_orders_without_the_fp8_remedies(dumps, capsys):
    """A production BF16 kernel holds P in float32 or BF16: no static scale, so no S = 256 runs
    and no remedy lines, and each run says how many of the non-sink P reach zero."""
    assert pcollapse_example.runs_of("torch-flash-sm90") == pcollapse_example.WIDE_RUNS
    assert pcollapse_example.runs_of("h100-fp8") == pcollapse_example.FP8_RUNS
    assert pcollapse_example.main([str(dumps), "--threads", "1", "--recipe", "torch-flash-sm90"]) == 0
    out = capsys.readouterr()[0]
    assert "S=256" not in out and "S = 256" not in out and "reverse order with S = 256" not in out, out
    counted = [line for line in out.splitlines() if "non-sink P at zero" in line]
    assert len(counted) == 2, out
    assert pcollapse_example.main([str(dumps), "--threads", "1", "--recipe", "fa3-fp8"]) == 0
    out = capsys.readouterr()[0]
    assert sum("non-sink P at zero" in line for line in out.splitlines()) == 4
    assert "reverse order with S = 256 leaves" in out


across = importlib.import_module("bias_across_kernels")


def test_delta_error_compared_across_kernels(dumps, tmp_path, capsys):
    results = []
    for recipe in ("fa2-bf16-torch-compiled", "torch-flash-sm90"):
        results.append(tmp_path / f"{recipe}.json")
        assert bias_example.main([str(dumps), "--threads", "1", "--recipe", recipe, "--json", str(results[-1])]) == 0
    capsys.readouterr()
    assert across.main([str(x) for x in results]) == 0
    out = capsys.readouterr()[0].splitlines()
    assert out[0].startswith("8 head-steps; reference fa2-bf16-torch-compiled"), out
    assert out[1].startswith("  torch-flash-sm90: same sign in "), out
    assert [x.split(":")[0] for x in out[2:]] == ["fa2-bf16-torch-compiled", "torch-flash-sm90"], out
    # against itself: every sign the same, correlation 1, the same size
    assert across.main([str(results[0]), str(results[0])]) == 0
    line = capsys.readouterr()[0].splitlines()[1]
    assert "(100.0%), correlation +1.000" in line and "(1.00x)" in line, line


@pytest.mark.parametrize("content, phrase", [
    ("not json", "not a pretrained_bias.py --json result (JSONDecodeError"),
    ('{"recipe": "x", "heads": []}', "not a pretrained_bias.py --json result (KeyError"),
    ('{"recipe": "x", "heads": [], "head_steps": [{"layer": 0}]}', "(KeyError"),
    ('{"recipe": "x", "heads": [], "head_steps": [{"layer": 0, "head": 0, "text": "t", "step": 0, '
     '"coefficient_sum": "nan"}]}', "coefficient_sum is not a finite number"),
])
def test_a_file_that_is_not_a_bias_result_is_refused(content, phrase, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert across.main([str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and phrase in err, err


def test_results_over_other_dumps_are_refused(tmp_path, capsys):
    def result(name, steps):
        (tmp_path / name).write_text(json.dumps({"recipe": name, "heads": [], "head_steps": [
            {"layer": 0, "head": h, "text": "t", "step": 0, "coefficient_sum": 1.0} for h in range(steps)]}))
        return str(tmp_path / name)
    assert across.main([result("a", 2), result("b", 3)]) == 2
    err = capsys.readouterr()[1]
    assert "b: other head-steps than" in err and len(err.strip().splitlines()) == 1, err
    assert across.main([str(tmp_path / "missing.json")]) == 2
    assert "missing.json: not a pretrained_bias.py --json result (FileNotFoundError" in capsys.readouterr()[1]
