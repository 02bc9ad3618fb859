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
