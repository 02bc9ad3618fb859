"""`roundscope fit`: the recipe search finds the settings of a kernel (here the emulator run with
choices hidden from the search) bit for bit, from the presets, alone or over several dumps at
once; it stops within its budget and says why; bad input gets one line and exit 2."""
import json
import random
import struct

import pytest

from files_by_hand import read_safetensors, write_safetensors

H, D = 2, 16
HIDDEN = ["kv_order=reverse", "exp2_arg=fma", "block_n=32"]  # on fa2-bf16


def gaussian(count, seed, scale):
    r = random.Random(seed)
    return struct.pack(f"<{count}f", *(r.gauss(0, scale) for _ in range(count)))


def kernel_dump(cli, folder, n, seed, settings=HIDDEN, recipe="fa2-bf16", outputs=("o", "lse")):
    """q, k, v of N keys and what the recipe with `settings` writes: a kernel whose choices fit finds."""
    inputs = {name: ("F32", [H, n, D], gaussian(H * n * D, seed + i, scale))
              for i, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0)])}
    write_safetensors(folder / f"in{n}.safetensors", inputs)
    out = folder / f"emu{n}_{seed}.safetensors"
    sets = [x for s in settings for x in ("--set", s)]
    cli.run("attention", folder / f"in{n}.safetensors", "--recipe", recipe, *sets, "-o", out)
    emulated, _ = read_safetensors(out)
    path = folder / f"kernel{n}_{seed}.safetensors"
    write_safetensors(path, {**inputs, **{k: emulated[k] for k in outputs}})
    return path


@pytest.fixture(scope="module")
def dumps(cli, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fit")
    return folder, kernel_dump(cli, folder, 128, 1), kernel_dump(cli, folder, 96, 7)


def test_fit_finds_the_hidden_settings_bit_for_bit(cli, dumps):
    _, one, _ = dumps
    j = cli.json("fit", one, "--rows", "24")
    assert j["exact"] and j["stopped"] == "every bit matches", j
    best = j["best"]
    assert best["matched"] == best["total"] == H * 128 * (D + 1), best
    assert set(best["outputs"]) == {"o", "lse"} and best["outputs"]["o"]["total"] == H * 128 * D
    assert set(j) == {"files", "best", "exact", "candidates", "sampled", "evaluations", "refused", "rounds",
                      "seconds", "stopped", "divergence"}, j.keys()
    assert j["divergence"] is None, "nothing diverges where every bit matches"
    assert j["candidates"][0]["matched"] >= j["candidates"][-1]["matched"] and len(j["candidates"]) <= 8
    # the winner, run as its settings say, writes the kernel's bits
    flags = ["--recipe", best["preset"], *[x for k, v in best["settings"].items() for x in ("--set", f"{k}={v}")]]
    c = cli.json("compare", one, *flags)
    assert c["matched"] == c["total"], c


def test_the_text_output_lists_the_candidates_and_the_progress(cli, dumps):
    _, one, _ = dumps
    p = cli.run("fit", one, "--rows", "24", "--top", "3")
    lines = p.stdout.strip().split("\n")
    assert lines[0].startswith(f"{one}: ") and "stopped: every bit matches" in lines[0], p.stdout
    assert lines[1].split()[:2] == ["rank", "bits"], p.stdout
    assert len(lines) == 1 + 1 + 3 + 1 and lines[-1].startswith("best, on every row: ") and "(100.0000 %)" in lines[-1]
    assert "--recipe " in lines[2] and "o 100.0000 %" in lines[2], p.stdout
    assert p.stderr.startswith("fit: round 0: ") and all(x.startswith("fit: round ") for x in p.stderr.splitlines())


def test_several_dumps_are_fitted_together(cli, dumps):
    _, one, two = dumps
    j = cli.json("fit", one, two, "--rows", "24")
    assert j["exact"] and j["files"] == [str(one), str(two)], j
    assert j["best"]["total"] == H * (128 + 96) * (D + 1)


def test_the_budget_stops_the_search_and_says_so(cli, dumps):
    _, one, _ = dumps
    j = cli.json("fit", one, "--max-evaluations", "5")
    assert not j["exact"] and j["stopped"] == "the evaluation limit" and j["evaluations"] <= 5, j
    j = cli.json("fit", one, "--from", "fa2-bf16", "--keys", "kv_order")
    assert not j["exact"] and j["stopped"] == "no change of one or two keys helps", j
    assert j["best"]["settings"] == {"kv_order": "reverse"}, "the one key it may change, changed where it helps"


def test_only_the_keys_named_change(cli, dumps):
    _, one, _ = dumps
    j = cli.json("fit", one, "--from", "fa2-bf16", "--keys", "kv_order,exp2_arg,block_n", "--rows", "24")
    assert j["exact"] and j["best"]["preset"] == "fa2-bf16", j
    assert j["best"]["settings"] == dict(s.split("=") for s in HIDDEN), j["best"]


def test_bad_input_gets_one_line(cli, dumps, tmp_path):
    folder, one, _ = dumps
    assert "fa9-bf16" in cli.error("fit", one, "--from", "fa9-bf16")
    assert "'colour'" in cli.error("fit", one, "--keys", "colour")
    assert "o_format" in cli.error("fit", one, "--keys", "o_format")
    assert "'dq'" in cli.error("fit", one, "--outputs", "o,dq")
    assert "--beam" in cli.error("fit", one, "--beam", "0")
    assert "--rows" in cli.error("fit", one, "--rows", "0")
    assert "--max-seconds" in cli.error("fit", one, "--max-seconds", "nan")
    assert "missing.safetensors" in cli.error("fit", folder / "missing.safetensors")
    f32 = kernel_dump(cli, folder, 64, 3, settings=[], recipe="fa2-f32")
    assert "dtypes differ" in cli.error("fit", one, f32)
    bare = tmp_path / "bare.safetensors"
    write_safetensors(bare, {n: ("F32", [H, 32, D], gaussian(H * 32 * D, 9, 1.0)) for n in ("q", "k", "v")})
    assert "nothing a kernel wrote" in cli.error("fit", bare)
    assert json.loads(cli.run("fit", f32, "--json", "--max-evaluations", "3").stdout)["best"]["total"] > 0


def test_where_no_recipe_matches_the_diverging_step_is_named(cli, dumps):
    """The search may not change exp2's argument: the rows that differ are those the kernel's fma
    changes, and that one change makes every sampled one match."""
    _, one, _ = dumps
    j = cli.json("fit", one, "--from", "fa2-bf16", "--keys", "kv_order,block_n", "--rows", "24")
    assert not j["exact"], j["best"]
    d = j["divergence"]
    assert 0 < d["rows"] <= d["rows_total"] == H * 128 and d["sampled"] == min(32, d["rows"]), d
    top = d["explanations"][0]
    assert (top["stage"], top["key"], top["value"], top["rows"]) == ("softmax", "exp2_arg", "fma", d["sampled"]), d
    assert d["first"]["file"] == str(one) and d["first"]["output"] in ("o", "lse") and len(d["first"]["index"]) >= 2
    assert d["first"]["kernel"] != d["first"]["recipe"]
    text = cli.run("fit", one, "--from", "fa2-bf16", "--keys", "kv_order,block_n", "--rows", "24").stdout
    assert "where the best differs: " in text and "rows match: softmax exp2_arg=fma" in text, text
    assert cli.json("fit", one, "--from", "fa2-bf16", "--keys", "kv_order", "--explain-rows", "0")["divergence"] is None
    # exp2's argument moves P-bar and so the row sum: every differing row's lse differs
    assert d["steps"] == {"statistics": d["rows"], "after_statistics": 0, "unsplit": 0}, d["steps"]
    assert f"where in the row: {d['rows']} in the softmax's statistics (their lse differs" in text, text


def test_where_in_the_row_a_kernel_parts_is_told_by_its_lse(cli, dumps):
    """A kernel that holds its running O in BF16 has the recipe's lse in every row: the rows that differ
    part after the softmax's statistics. Without an lse in the dump a row cannot be split."""
    folder, _, _ = dumps
    after = kernel_dump(cli, folder, 256, 11, settings=["o_accumulator=bf16"])
    j = cli.json("fit", after, "--from", "fa2-bf16", "--keys", "kv_order", "--rows", "24")
    d = j["divergence"]
    assert not j["exact"] and d["rows"] > 0, j
    assert d["steps"] == {"statistics": 0, "after_statistics": d["rows"], "unsplit": 0}, d["steps"]
    assert d["first"]["output"] == "o"
    text = cli.run("fit", after, "--from", "fa2-bf16", "--keys", "kv_order", "--rows", "24").stdout
    assert f"where in the row: {d['rows']} after them (lse equal, o differs" in text, text
    bare = kernel_dump(cli, folder, 256, 12, settings=["o_accumulator=bf16"], outputs=("o",))
    d = cli.json("fit", bare, "--from", "fa2-bf16", "--keys", "kv_order", "--rows", "24")["divergence"]
    assert d["steps"] == {"statistics": 0, "after_statistics": 0, "unsplit": d["rows"]} and d["rows"] > 0, d
