"""`roundscope compare`: a dump whose kernel outputs are the recipe's own emulation matches bit for
bit and has the truth errors `attention --truth` reports; one flipped bit is found where it is
(one mismatch, 1 ulp); the ulp histogram counts every element; the JSON keeps docs/cli.md's
keys; bad dumps get one line and exit 2."""
import random
import struct

import pytest

from files_by_hand import read_safetensors, write_safetensors

H, N, D = 2, 80, 16
KERNEL_OUTPUTS = ["o", "lse", "dq", "dk", "dv"]
CAUSAL = {"causal": "true"}


def gaussian(count, seed, scale):
    r = random.Random(seed)
    return struct.pack(f"<{count}f", *(r.gauss(0, scale) for _ in range(count)))


INPUTS = {name: ("F32", [H, N, D], gaussian(H * N * D, seed, scale))
          for seed, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0), ("do", 1.0)])}


@pytest.fixture(scope="module")
def emulation(cli, tmp_path_factory):
    """fa2-bf16's outputs of INPUTS, the errors `attention --truth` gives them, and a folder."""
    folder = tmp_path_factory.mktemp("compare")
    write_safetensors(folder / "in.safetensors", INPUTS, CAUSAL)
    truth_errors = cli.json("attention", folder / "in.safetensors", "--recipe", "fa2-bf16", "--backward", "--truth",
                            "-o", folder / "emu.safetensors")["errors"]
    emulated, _ = read_safetensors(folder / "emu.safetensors")
    return folder, emulated, truth_errors


def dump(folder, name, outputs, without=()):
    tensors = {k: v for k, v in INPUTS.items() if k not in without}
    tensors.update(outputs)
    write_safetensors(folder / name, tensors, CAUSAL)
    return folder / name


def test_the_recipes_own_outputs_match_every_bit(cli, emulation):
    folder, emulated, truth_errors = emulation
    j = cli.json("compare", dump(folder, "same.safetensors", {k: emulated[k] for k in KERNEL_OUTPUTS}),
                 "--recipe", "fa2-bf16")
    assert sorted(j["outputs"]) == sorted(KERNEL_OUTPUTS)
    assert j["matched"] == j["total"] == H * N * (4 * D + 1)
    for name, o in j["outputs"].items():
        assert {"max_abs", "rms", "rel_rms", "ulp_histogram", "worst", "matched", "total", "max_ulp"} <= set(o), name
        assert o["max_ulp"] == 0 and o["matched"] == o["total"], (name, o)
        assert sum(b["count"] for b in o["ulp_histogram"]) == o["total"], (name, o["ulp_histogram"])
        for key in ("max_abs", "rms", "rel_rms"):  # the truth side as attention --truth gives it
            assert abs(o[key] - truth_errors[name][key]) <= 1e-15 * max(1, abs(o[key])), (name, key)
        worst = o["worst"]
        assert 0 < len(worst) <= 8 and all(len(w["index"]) == (3 if name != "lse" else 2) for w in worst), worst
        errors = [abs(w["kernel"] - w["truth"]) for w in worst]
        assert errors == sorted(errors, reverse=True) and errors[0] == o["max_abs"], (name, worst, o["max_abs"])


def test_one_flipped_bit_is_found_where_it_is(cli, emulation):
    folder, emulated, _ = emulation
    dtype, shape, raw = emulated["o"]
    flipped = bytearray(raw)
    flipped[2 * ((1 * N + 5) * D + 7)] ^= 1  # o[1, 5, 7]
    j = cli.json("compare", dump(folder, "flipped.safetensors", {"o": (dtype, shape, bytes(flipped))}),
                 "--recipe", "fa2-bf16")
    assert list(j["outputs"]) == ["o"], "only o is compared where only o is there"
    o = j["outputs"]["o"]
    assert o["matched"] == o["total"] - 1 == H * N * D - 1 and o["max_ulp"] == 1, o


def test_the_text_report_names_every_output_and_the_totals(cli, emulation):
    folder, emulated, _ = emulation
    out = cli.run("compare", dump(folder, "same.safetensors", {k: emulated[k] for k in KERNEL_OUTPUTS}),
                  "--recipe", "fa2-bf16").stdout
    assert all(f"\n{k} " in out for k in KERNEL_OUTPUTS), out
    assert f"{H * N * (4 * D + 1)} of {H * N * (4 * D + 1)} output bit patterns" in out, out


def test_bad_dumps_get_one_line(cli, emulation):
    folder, emulated, _ = emulation
    _, _, raw = emulated["o"]

    def message(name, outputs, without=(), recipe="fa2-bf16"):
        return cli.error("compare", dump(folder, name, outputs, without), "--recipe", recipe)

    assert "nothing a kernel wrote" in message("nothing.safetensors", {})
    m = message("no_do.safetensors", {"dq": emulated["dq"]}, without=("do",))
    assert "'dq'" in m and "'do'" in m, m
    m = message("f32_o.safetensors", {"o": ("F32", [H, N, D], gaussian(H * N * D, 9, 1.0))})
    assert all(s in m for s in ("'o'", "bf16", "fa2-bf16")), m
    m = message("short_o.safetensors", {"o": ("BF16", [H, N - 1, D], raw[: 2 * H * (N - 1) * D])})
    assert "'o'" in m and f"[{H}, {N}, {D}]" in m, m
    assert "fa9-bf16" in message("o.safetensors", {"o": emulated["o"]}, recipe="fa9-bf16")
    assert "missing.safetensors" in cli.error("compare", folder / "missing.safetensors", "--recipe", "fa2-bf16")


# -- what a kernel's CI asks: NaN, sign flips near zero, tolerances, a forward-only comparison --
def bf16_at(raw, i):
    return struct.unpack_from("<H", raw, 2 * i)[0]


def with_bf16(raw, changes):
    out = bytearray(raw)
    for i, bits in changes.items():
        struct.pack_into("<H", out, 2 * i, bits)
    return bytes(out)


@pytest.fixture(scope="module")
def small_first_column(cli, tmp_path_factory):
    """fa2-bf16's o where every row's first element is near zero (v's first feature 1e-4 times the
    others), so that a sign flip there is a flip near zero."""
    folder = tmp_path_factory.mktemp("ci")
    r = random.Random(5)
    v = [r.gauss(0, 1e-4 if c == 0 else 1.0) for _ in range(H * N) for c in range(D)]
    inputs = dict(INPUTS, v=("F32", [H, N, D], struct.pack(f"<{H * N * D}f", *v)))
    write_safetensors(folder / "in.safetensors", inputs, CAUSAL)
    cli.run("attention", folder / "in.safetensors", "--recipe", "fa2-bf16", "--backward",
            "-o", folder / "e.safetensors")
    emulated, _ = read_safetensors(folder / "e.safetensors")
    return folder, inputs, emulated


def test_a_nan_and_a_sign_flip_near_zero_are_counted_apart(cli, small_first_column):
    folder, inputs, emulated = small_first_column
    dtype, shape, raw = emulated["o"]
    flip, nan = (0 * N + 5) * D + 0, (1 * N + 9) * D + 3  # o[0, 5, 0] (near zero), o[1, 9, 3]
    changed = with_bf16(raw, {flip: bf16_at(raw, flip) ^ 0x8000, nan: 0x7FC0})
    write_safetensors(folder / "k.safetensors", dict(inputs, o=(dtype, shape, changed)), CAUSAL)
    o = cli.json("compare", folder / "k.safetensors", "--recipe", "fa2-bf16")["outputs"]["o"]
    assert o["matched"] == o["total"] - 2, o
    assert o["sign_flips_near_zero"] == 1 and o["nonfinite"] == 1, o
    assert o["first_nonfinite"]["index"] == [1, 9, 3] and o["first_nonfinite"]["kernel"] == "nan", o
    assert o["largest_difference"]["index"] == [1, 9, 3] and o["largest_difference"]["ulp"] is None, o
    assert o["max_ulp"] is None and o["max_row_ulp"] == "inf", "a NaN has no finite distance"
    text = cli.run("compare", folder / "k.safetensors", "--recipe", "fa2-bf16").stdout
    assert "o: 1 NaN or Inf where the truth is finite (the first at [1, 9, 3]), 1 sign flip(s) near zero" in text, text
    # the flip alone: thousands of ulps of its own value, under two of its row's largest
    flipped = with_bf16(raw, {flip: bf16_at(raw, flip) ^ 0x8000})
    write_safetensors(folder / "f.safetensors", dict(inputs, o=(dtype, shape, flipped)), CAUSAL)
    o = cli.json("compare", folder / "f.safetensors", "--recipe", "fa2-bf16")["outputs"]["o"]
    assert o["max_ulp"] > 1000 and 0 < o["max_row_ulp"] < 2 and o["nonfinite"] == 0, o


def test_tolerances_count_the_elements_outside_them(cli, small_first_column):
    folder, inputs, emulated = small_first_column
    dtype, shape, raw = emulated["o"]
    one_ulp = with_bf16(raw, {7: bf16_at(raw, 7) ^ 1})
    write_safetensors(folder / "u.safetensors", dict(inputs, o=(dtype, shape, one_ulp)), CAUSAL)
    tight = cli.json("compare", folder / "u.safetensors", "--recipe", "fa2-bf16", "--rtol", "0", "--atol", "0")
    loose = cli.json("compare", folder / "u.safetensors", "--recipe", "fa2-bf16", "--rtol", "0.01", "--atol", "0")
    assert tight["outputs"]["o"]["outside_tolerance"] == 1 and loose["outputs"]["o"]["outside_tolerance"] == 0
    plain = cli.json("compare", folder / "u.safetensors", "--recipe", "fa2-bf16")
    assert "outside_tolerance" not in plain["outputs"]["o"]
    assert "--atol" in cli.error("compare", folder / "u.safetensors", "--recipe", "fa2-bf16", "--rtol", "0.1")
    assert "--rtol" in cli.error("compare", folder / "u.safetensors", "--recipe", "fa2-bf16", "--rtol", "nan",
                                 "--atol", "0")


def test_a_forward_only_recipe_compares_the_forward_outputs_of_a_dump_with_gradients(cli, emulation):
    folder, emulated, _ = emulation
    path = dump(folder, "all.safetensors", {k: emulated[k] for k in KERNEL_OUTPUTS})
    j = cli.json("compare", path, "--recipe", "fa2-bf16", "--outputs", "o,lse")
    assert list(j["outputs"]) == ["lse", "o"] or sorted(j["outputs"]) == ["lse", "o"], j["outputs"].keys()
    assert j["matched"] == j["total"] == H * N * (D + 1), j
    # h100-fp8 models FlashAttention-3's forward pass only: asked for, the gradients are refused;
    # by default the forward outputs are compared, and the output says the gradients were not
    assert "backward" in cli.error("compare", path, "--recipe", "h100-fp8", "--outputs", "o,dq").lower()
    forward = cli.json("compare", path, "--recipe", "h100-fp8", "--outputs", "o,lse")
    assert sorted(forward["outputs"]) == ["lse", "o"] and forward["notes"] == [], forward
    implicit = cli.json("compare", path, "--recipe", "h100-fp8")
    assert sorted(implicit["outputs"]) == ["lse", "o"] and implicit["total"] == forward["total"], implicit
    assert len(implicit["notes"]) == 1 and "FlashAttention-3's forward is modelled" in implicit["notes"][0], implicit
    assert "gradients are not compared" in implicit["notes"][0]
    assert implicit["notes"][0] in cli.run("compare", path, "--recipe", "h100-fp8").stdout
    # torch-flash-sm90 models PyTorch's flash backward too; past one key block (N 128 at D 64)
    # its dQ is one order of the GPU's atomic adds, and compare says so
    both = cli.json("compare", path, "--recipe", "torch-flash-sm90", "--set", "split_kv_sms=0")
    assert sorted(both["outputs"]) == ["dk", "dq", "dv", "lse", "o"], both
    assert (both["notes"] != []) == (N > 128) and all(n.startswith("dq: ") for n in both["notes"]), both
    # torch-cudnn-sm90 models cuDNN's backward at D 64 only (its one captured engine): at D 16 the
    # forward outputs are compared, and the note says why
    cudnn = cli.json("compare", path, "--recipe", "torch-cudnn-sm90")
    assert sorted(cudnn["outputs"]) == ["lse", "o"] and len(cudnn["notes"]) == 1, cudnn
    assert "head dimension 64" in cudnn["notes"][0] and "gradients are not compared" in cudnn["notes"][0]
    assert "'x'" in cli.error("compare", path, "--recipe", "fa2-bf16", "--outputs", "o,x")
    assert "twice" in cli.error("compare", path, "--recipe", "fa2-bf16", "--outputs", "o,o")
    only_o = dump(folder, "only_o.safetensors", {"o": emulated["o"]})
    assert "'dq'" in cli.error("compare", only_o, "--recipe", "fa2-bf16", "--outputs", "o,dq")


def test_torch_flash_backward_says_when_dq_depends_on_the_order_of_atomic_adds(cli, tmp_path):
    """torch-flash-sm90's own outputs of 200 keys at D 16 (two key blocks of 128): bit for bit, and
    both the JSON and the text say that the GPU's dQ is one of several (atomicAdd's order)."""
    n = 200
    inputs = {name: ("F32", [1, n, 16], gaussian(n * 16, seed, 1.0)) for seed, name in enumerate(["q", "k", "v", "do"])}
    write_safetensors(tmp_path / "in.safetensors", inputs, CAUSAL)
    cli.json("attention", tmp_path / "in.safetensors", "--recipe", "torch-flash-sm90", "--backward",
             "-o", tmp_path / "emu.safetensors")
    emulated, _ = read_safetensors(tmp_path / "emu.safetensors")
    write_safetensors(tmp_path / "dump.safetensors", dict(inputs, **{k: emulated[k] for k in KERNEL_OUTPUTS}),
                      CAUSAL)
    j = cli.json("compare", tmp_path / "dump.safetensors", "--recipe", "torch-flash-sm90")
    assert j["matched"] == j["total"] and len(j["notes"]) == 1 and "2 key blocks" in j["notes"][0], j
    text = cli.run("compare", tmp_path / "dump.safetensors", "--recipe", "torch-flash-sm90").stdout
    assert j["notes"][0] in text
    forward = cli.json("compare", tmp_path / "dump.safetensors", "--recipe", "torch-flash-sm90", "--outputs", "o,lse")
    assert forward["notes"] == []  # no dQ compared


def test_recipes_name_each_presets_sources(cli):
    """`roundscope recipes` says where each preset comes from (the kernel or paper, what checks it):
    in its JSON (`source`) and under its text table."""
    presets = cli.json("recipes")["recipes"]
    assert len(presets) >= 22 and all(p["source"] for p in presets), [p["name"] for p in presets if not p["source"]]
    sources = {p["name"]: p["source"] for p in presets}
    assert "HMMA.1688" in sources["torch-efficient-sm90"] and "bit-exact" in sources["torch-cudnn-sm90"]
    assert "softmax_warp_forward" in sources["torch-math-sm90"]
    text = cli.run("recipes").stdout
    assert "Sources:" in text and all(f"  {name}" in text and source in text for name, source in sources.items())


def test_cudnns_backward_past_its_captured_shape_is_compared_with_a_note(cli, tmp_path):
    """torch-cudnn-sm90's backward at D 64 past the captured 128 keys: its own outputs match every
    bit, and the note says the orders of the gradients' sums there are untested; at 128 keys none."""
    for n, noted in ((136, True), (128, False)):
        inputs = {name: ("F32", [1, n, 64], gaussian(n * 64, seed, scale))
                  for seed, (name, scale) in enumerate([("q", 2.0), ("k", 2.0), ("v", 1.0), ("do", 1.0)])}
        write_safetensors(tmp_path / f"in{n}.safetensors", inputs, CAUSAL)
        cli.json("attention", tmp_path / f"in{n}.safetensors", "--recipe", "torch-cudnn-sm90", "--backward", "-o",
                 tmp_path / f"out{n}.safetensors")
        out, _ = read_safetensors(tmp_path / f"out{n}.safetensors")
        write_safetensors(tmp_path / f"dump{n}.safetensors", {**inputs, **{k: out[k] for k in KERNEL_OUTPUTS}},
                          CAUSAL)
        j = cli.json("compare", tmp_path / f"dump{n}.safetensors", "--recipe", "torch-cudnn-sm90")
        assert sorted(j["outputs"]) == sorted(KERNEL_OUTPUTS) and j["matched"] == j["total"], j
        assert [("no GPU run has tested" in x) for x in j["notes"]] == ([True] if noted else []), j["notes"]
