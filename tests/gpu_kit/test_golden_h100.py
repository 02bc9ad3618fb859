"""The H100 captures of 2026-11-27 (tests/data/golden/h100, docs/gpu.md), ingested as a GPU
session's output is: phase B's crosscheck sweep must be bit-exact in every case, and phase C's
PyTorch flash forward and backward must be reproduced bit for bit (O, LSE; dQ, dK, dV) by the
torch-flash-sm90 recipe, whose MUFU.EX2 and MUFU.LG2 are the H100's own (emu/mufu/h100_mufu.hpp);
cuDNN's forward and backward by torch-cudnn-sm90, the memory-efficient kernel's forward and
backward by torch-efficient-sm90 and the math path's forward by torch-math-sm90. The inputs
are made again here by kit_inputs and must hash as on the GPU."""
import json
import os
import pathlib
import subprocess
import sys

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden" / "h100"
H200 = GOLDEN.parent / "h200"
BUILD = pathlib.Path(os.environ.get("ROUNDSCOPE_BUILD", ROOT / "build"))


# torch-math-sm90's choices, each alone, and how many of the 16 BF16 math captures it changes at least
# (measured: 14 and 10)
MATH_NEGATIVE_CONTROLS = {"score_product=f64": 14, "pv_product=f64": 10}


def ingest(phase, tmp_path, *more, golden=GOLDEN):
    bins = tmp_path / "bin"
    bins.mkdir()
    for name, where in (("roundscope", BUILD), ("mufu_fit", BUILD / "tools/gpu"), ("kit_inputs", BUILD / "tools/gpu")):
        (bins / name).symlink_to(where / name)
    report = tmp_path / "report.json"
    p = subprocess.run([sys.executable, ROOT / "tools/gpu/ingest.py", golden / f"phase-{phase}", "--golden",
                        tmp_path / "golden", "--bin", bins, "--json", report, *more], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(report.read_text())


def test_every_crosscheck_case_ran_bit_exact_on_the_h100(tmp_path):
    r = ingest("B", tmp_path)
    assert r["sweep"]["cases"] == 560 and r["sweep"]["not_exact"] == 0
    kernels = {b["kernel"]: b for b in r["bench"]}
    assert {"torch flash", "torch cudnn", "roundscope fa2-bf16"} <= kernels.keys()
    assert kernels["roundscope fa2-bf16"]["device"] == "NVIDIA H100 80GB HBM3"


def test_the_hopper_kernel_gave_the_emulators_bits_on_hardware(tmp_path):
    """The one-call Hopper check (tools/gpu/hopper_check.sh) as it came back from an H200
    (2026-12-04): both sweeps of h100-bf16 bit-exact and every raw answer of the Hopper kernel
    (o and lse) equal to the emulator's here, bit for bit; its speed beside PyTorch's on the
    same inputs. Its dry run (gpu_kit_dry_run) proves the check."""
    r = ingest("H", tmp_path)
    assert r["sweep"]["cases"] == r["sweep-ex2"]["cases"] == 80
    assert r["sweep"]["not_exact"] == r["sweep-ex2"]["not_exact"] == 0
    assert len(r["goldens"]) == 16 and all(g["exact"] for g in r["goldens"]), r["goldens"]
    assert {g["device"] for g in r["goldens"]} == {"NVIDIA H200"}
    kernels = {b["kernel"]: b for b in r["bench"]}
    ex2 = kernels["roundscope hopper h100-bf16 exp2=ex2.approx.ftz"]
    assert ex2["device"] == "NVIDIA H200" and (ex2["heads"], ex2["n"], ex2["d"]) == (64, 4096, 128)
    # measured, not modelled: the figures docs/performance.md quotes
    assert ex2["ratio_to"]["torch flash"] > 1.6 and ex2["tflops"] > 550


def test_the_wgmma_layouts_and_the_pair_cast_held_on_the_h200():
    """The check's layout step as it came back: the 80 wgmma layouts the Hopper kernel's operands
    take (N 64 and 128, swizzles, K- and MN-major, A from registers) and cvt.rn.satfinite.bf16x2
    on all 2^32 inputs, each with no output off the sm90 model."""
    import re
    import tarfile

    with tarfile.open(GOLDEN / "phase-H" / "H-all.tar.xz") as tar:
        log = tar.extractfile("logs/layout.log").read().decode()
    layouts = re.findall(r"^wgmma layout .*: (\d+) of (\d+) outputs differ", log, re.M)
    assert len(layouts) == 80 and all(bad == "0" for bad, _ in layouts)
    assert "cvt.rn.satfinite.bf16x2.f32: 0 mismatches" in log


def test_the_hopper_kernel_is_clean_under_every_sanitizer_on_hardware():
    """The H200's sanitizers on the Hopper kernel (N 300: every ring stage reused; D 64 and 128).
    The one call's initcheck flagged every 32-byte sector of the TMA-stored O and nothing else,
    with O's bits exact (initcheck does not see the TMA unit's stores); the second call ran with
    outputs poisoned first (DeviceBuffer::poison) and initcheck and memcheck found nothing."""
    first = (GOLDEN / "phase-H" / "summary.json").read_text()
    steps = {s["name"]: s["status"] for s in json.loads(first)["steps"]}
    assert steps["sanitizers"] == "failed"  # the initcheck of the TMA store, kept as it came back
    log = (GOLDEN / "phase-H" / "second-call" / "sanitizers.log").read_text()
    assert log.count("ERROR SUMMARY: 0 errors") == 2 and log.count("rc=0") == 2
    assert log.count("16 flash-attention cases run, 0 failing") == 2


@pytest.fixture(scope="module")
def phase_c(tmp_path_factory):
    """Phase C ingested, with the dumps it compared kept (tools/gpu/ingest.py --dumps)."""
    folder = tmp_path_factory.mktemp("phase_c")
    return ingest("C", folder, "--dumps", folder / "dumps"), folder / "dumps"


def test_pytorchs_flash_forward_is_reproduced_bit_for_bit(phase_c):
    r, _ = phase_c
    forward = [e for e in r["sdpa"] if e["pass"] == "forward" and e["dtype"] == "bf16"]
    flash = [e for e in forward if e["case"].startswith("flash.")]
    cudnn = [e for e in forward if e["case"].startswith("cudnn.")]
    unsplit = [e for e in flash if not e["file"].startswith("sdpa_S2_")]
    split = [e for e in flash if e["file"].startswith("sdpa_S2_")]
    assert len(unsplit) == 8 + 8  # S1 and S3, four scenarios, causal and not
    # S2 ran PyTorch's split-KV kernel (8 splits of one 128-key tile) and its combine: the recipe
    # runs the same path (emu/attention/flash/flash_split_kv.hpp)
    assert len(split) == 8
    for e in unsplit + split:
        got = e["torch-flash-sm90"]
        assert got["matched"] == got["total"], e
    # cuDNN's kernel is not PyTorch's flash: some bits differ, and the recipe says so.
    assert cudnn and all(e["torch-flash-sm90"]["matched"] < e["torch-flash-sm90"]["total"] for e in cudnn)


def test_cudnns_forward_is_reproduced_bit_for_bit(phase_c):
    """cuDNN's SDPA forward (`cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16`, knob 7,
    64 x 128 tiles) on S1 and S3's batch 0, four scenarios, causal and not: torch-cudnn-sm90 gives
    every O and LSE bit. Each of its choices alone (the 64-key tiles PyTorch's flash takes at D 128,
    the reverse KV order, the rescale from the raw maxima, FlashAttention-3's join of the row sum's
    lanes, PyTorch's flash epilogue) changes at least one capture."""
    r, dumps = phase_c
    cudnn = [e for e in r["sdpa"] if e["pass"] == "forward" and e["dtype"] == "bf16" and e["case"].startswith("cudnn.")]
    assert len(cudnn) == 16
    for e in cudnn:
        got = e["torch-cudnn-sm90"]
        assert got["matched"] == got["total"] and got["total"] in (2 * 128 * 65, 1000 * 129), e
    flash = [e for e in r["sdpa"] if e["pass"] == "forward" and e["dtype"] == "bf16" and e["case"].startswith("flash.")]
    assert all(e["torch-cudnn-sm90"]["matched"] < e["torch-cudnn-sm90"]["total"] for e in flash if "S3" in e["file"])
    files = sorted(f for f in dumps.glob("S[13].cudnn.bf16.*.safetensors") if not f.name.endswith(".grad.safetensors"))
    assert len(files) == 16
    for choice in ("block_n=auto", "kv_order=reverse", "rescale_arg=raw", "row_sum=lane-tile", "epilogue=torch-flash"):
        differ = 0
        for f in files:
            c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, "--recipe", "torch-cudnn-sm90", "--set",
                                           choice, "--json"], capture_output=True, text=True, check=True).stdout)
            differ += c["matched"] < c["total"]
        assert differ >= 4, choice


def test_cudnns_backward_is_reproduced_bit_for_bit(phase_c):
    """cuDNN's SDPA backward (`cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26`,
    64 x 64 x 64 tiles, after `compute_dot_do_o`) on S1's BF16 captures, four scenarios, causal and
    not: torch-cudnn-sm90 gives every dQ, dK and dV bit (and its forward's O and LSE). Negative
    controls, each rule alone (measured: delta summed in feature order changes 5 of the 8 cases,
    exp2f's guard instead of MUFU.EX2's ftz 1, the wide scores'); PyTorch's flash backward (128 x 128
    tiles, P from the log2 LSE) misses bits of every case."""
    r, dumps = phase_c
    cudnn = [e for e in r["sdpa"] if e["pass"] == "backward" and e["case"].startswith("cudnn.")]
    assert len(cudnn) == 8
    for e in cudnn:
        got = e["torch-cudnn-sm90"]
        assert got["total"] == 2 * 128 * (64 + 1) + 3 * 2 * 128 * 64 and got["matched"] == got["total"], e
        assert got["notes"] == [], e  # 128 queries and keys: the captured orders
        assert e["torch-flash-sm90"]["matched"] < e["torch-flash-sm90"]["total"], e
    files = sorted(dumps.glob("S1.cudnn.bf16.*.grad.safetensors"))
    assert len(files) == 8

    def changed(choice):
        out = 0
        for f in files:
            c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, "--recipe", "torch-cudnn-sm90", "--set",
                                           choice, "--json"], capture_output=True, text=True, check=True).stdout)
            out += c["matched"] < c["total"]
        return out

    assert changed("delta_sum=sequential") >= 4
    assert changed("exp2=exp2f") >= 1


def test_fp16_forward_of_flash_and_cudnn_is_reproduced_bit_for_bit(phase_c):
    """S1's FP16 forward captures: PyTorch's flash under torch-flash-sm90 and cuDNN under
    torch-cudnn-sm90, each with FP16 inputs, P and O (`--set input=f16 --set p_format=f16 --set
    o_format=f16`), give every O and LSE bit; fa2-f16 does not."""
    r, _ = phase_c
    f16 = [e for e in r["sdpa"] if e["dtype"] == "f16"]
    assert sorted(e["case"].split(".")[0] for e in f16) == ["cudnn"] * 8 + ["efficient"] * 8 + ["flash"] * 8 + \
        ["math"] * 8
    f16 = [e for e in f16 if not e["case"].startswith("math.")]  # (test_pytorchs_math_path_...)
    for e in f16:
        recipe = {"cudnn": "torch-cudnn-sm90", "efficient": "torch-efficient-sm90"}.get(e["case"].split(".")[0],
                                                                                       "torch-flash-sm90")
        got = e[recipe]
        assert got["matched"] == got["total"] == 2 * 128 * 65, e
        assert "input=f16" in got["set"] and "o_format=f16" in got["set"], e
    assert any(e["fa2-f16"]["matched"] < e["fa2-f16"]["total"] for e in f16)


def test_pytorchs_flash_backward_is_reproduced_bit_for_bit(phase_c):
    """S1's backward captures (B 1, H 2, N 128, D 64, BF16; four scenarios, causal and not):
    torch-flash-sm90 gives PyTorch's flash dQ, dK and dV bit for bit, with the forward's O and LSE
    (65,792 values a case). Its delta is FlashAttention-2's dot_do_o order: summed in feature
    order instead, most cases differ. cuDNN's and the efficient kernel's backward are other kernels
    (their recipes: the tests beside this one)."""
    r, dumps = phase_c
    backward = [e for e in r["sdpa"] if e["pass"] == "backward"]
    flash = [e for e in backward if e["case"].startswith("flash.")]
    assert len(flash) == 8 and {e["file"] for e in flash} == {"sdpa_S1_bf16_bwd.safetensors"}
    for e in flash:
        got = e["torch-flash-sm90"]
        assert got["total"] == 2 * 128 * (64 + 1) + 3 * 2 * 128 * 64 and got["matched"] == got["total"], e
        assert got["notes"] == []  # one key block: dQ does not depend on the atomics' order
    others = [e for e in backward if not e["case"].startswith("flash.")]
    assert len(others) == 16 and all(e["torch-flash-sm90"]["matched"] < e["torch-flash-sm90"]["total"] for e in others)
    # the negative control: delta summed in feature order
    differ = 0
    for f in sorted(dumps.glob("S1.flash.*.grad.safetensors")):
        c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, "--recipe", "torch-flash-sm90", "--set",
                                       "delta_sum=sequential", "--json"], capture_output=True, text=True,
                                      check=True).stdout)
        differ += c["matched"] < c["total"]
    assert differ >= 6


def test_the_memory_efficient_kernel_is_reproduced_bit_for_bit_forward_and_backward(phase_c):
    """PyTorch's memory-efficient SDPA (fmha_cutlassF_*_64x64_rf_sm80 at D 64, 64x128_rf at D 128;
    fmha_cutlassB_bf16_aligned_64x64_k64_seqaligned_sm80) under torch-efficient-sm90: every O and
    LSE bit of S1 and S3's BF16 forward and S1's FP16 forward, and every dQ, dK and dV bit of S1's
    backward, where two key splits continue dQ in the order they reach each query block (the
    note says the GPU does not fix it). Negative controls: the m16n8k16 instruction (PyTorch's
    flash and cuDNN's) changes every forward capture, delta summed in feature order most
    backward ones."""
    r, dumps = phase_c
    efficient = [e for e in r["sdpa"] if e["case"].startswith("efficient.")]
    forward = [e for e in efficient if e["pass"] == "forward"]
    backward = [e for e in efficient if e["pass"] == "backward"]
    assert len(forward) == 16 + 8 and len(backward) == 8
    for e in forward + backward:
        got = e["torch-efficient-sm90"]
        assert got["matched"] == got["total"], e
    for e in backward:
        got = e["torch-efficient-sm90"]
        assert got["total"] == 2 * 128 * (64 + 1) + 3 * 2 * 128 * 64, e
        assert len(got["notes"]) == 1 and got["notes"][0].startswith("dq: ") and "2 key splits" in got["notes"][0]
    # PyTorch's flash and cuDNN are other kernels: their recipes miss bits of every forward capture
    for e in forward:
        assert all(e[other]["matched"] < e[other]["total"] for other in ("torch-flash-sm90", "torch-cudnn-sm90")), e

    def changed(pattern, choice):
        files = sorted(dumps.glob(pattern))
        out = 0
        for f in files:
            c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, "--recipe", "torch-efficient-sm90",
                                           "--set", choice, "--json"], capture_output=True, text=True,
                                          check=True).stdout)
            out += c["matched"] < c["total"]
        return out, len(files)

    assert changed("S[13].efficient.bf16.*.full.safetensors", "instruction=mma.sync") == (8, 8)
    differ, n = changed("S1.efficient.bf16.*.grad.safetensors", "delta_sum=sequential")
    assert n == 8 and differ >= 4


def test_pytorchs_math_path_is_reproduced_bit_for_bit(phase_c):
    """PyTorch's math path (cuBLAS's sm80_xmma_gemm_f32f32_*_ffma SGEMMs, ATen's
    softmax_warp_forward, float32 between them) under torch-math-sm90: every O bit of S1 and S3's
    BF16 captures and S1's FP16 ones (it writes no LSE). Negative controls: either GEMM exact
    (score_product=f64, pv_product=f64) changes captures; the fused kernels' recipes miss bits."""
    r, dumps = phase_c
    math = [e for e in r["sdpa"] if e["case"].startswith("math.")]
    assert len(math) == 16 + 8 and all(e["pass"] == "forward" for e in math)
    for e in math:
        got = e["torch-math-sm90"]
        assert got["matched"] == got["total"] and got["total"] in (2 * 128 * 64, 1000 * 128), e
        assert set(got["outputs"]) == {"o"}, e

    def changed(choice):
        files = sorted(dumps.glob("S[13].math.bf16.*.safetensors"))
        differ = 0
        for f in files:
            c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, "--recipe", "torch-math-sm90",
                                           "--set", choice, "--json"], capture_output=True, text=True,
                                          check=True).stdout)
            differ += c["matched"] < c["total"]
        return differ, len(files)

    for choice, least in MATH_NEGATIVE_CONTROLS.items():
        differ, n = changed(choice)
        assert n == 16 and differ >= least, (choice, differ)
    flash = json.loads(subprocess.run([BUILD / "roundscope", "compare", dumps / "S1.math.bf16.random.full.safetensors",
                                       "--recipe", "torch-flash-sm90", "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    assert flash["matched"] < flash["total"]


def test_fit_finds_pytorchs_flash_forward_from_the_generic_presets(phase_c):
    """`roundscope fit` on two shapes' captures, starting from every preset but torch-flash-sm90
    (the recipe found by hand): a recipe that reproduces all 16 unsplit captures bit for bit."""
    _, dumps = phase_c
    recipes = json.loads(subprocess.run([BUILD / "roundscope", "recipes", "--json"], capture_output=True,
                                        text=True, check=True).stdout)["recipes"]
    starts = [x for r in recipes if r["name"] != "torch-flash-sm90" for x in ("--from", r["name"])]
    fitted = [dumps / "S1.flash.bf16.random.full.safetensors", dumps / "S3.flash.bf16.sink.causal.safetensors"]
    p = subprocess.run([BUILD / "roundscope", "fit", *fitted, *starts, "--rows", "32", "--json"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["exact"], j["best"]
    best = j["best"]
    flags = ["--recipe", best["preset"], *[x for k, v in best["settings"].items() for x in ("--set", f"{k}={v}")]]
    unsplit = sorted(f for f in dumps.glob("S[13].flash.bf16.*.safetensors")
                     if not f.name.endswith(".grad.safetensors"))
    assert len(unsplit) == 16
    for f in unsplit:
        c = json.loads(subprocess.run([BUILD / "roundscope", "compare", f, *flags, "--json"], capture_output=True,
                                      text=True, check=True).stdout)
        assert c["matched"] == c["total"], (f.name, flags)


def test_trim_probe_trims_a_capture_and_refuses_what_is_not_one(tmp_path):
    """tools/gpu/trim_probe.py, which phase A runs on the GPU: a capture's first tiles raw and every
    tile's digests; a truncated, corrupt or foreign file gets one line and exit 2, nothing written."""
    trim = ROOT / "tools/gpu/trim_probe.py"
    capture = sorted((ROOT / "tests/data/golden/h200/probe").glob("*.safetensors"))[0]

    def run(*paths):
        return subprocess.run([sys.executable, trim, *paths, "--out", tmp_path / "out", "--keep", "2"],
                              capture_output=True, text=True, timeout=120)

    ok = run(capture)
    assert ok.returncode == 0 and (tmp_path / "out" / capture.name).exists(), ok.stderr
    data = capture.read_bytes()
    n = int.from_bytes(data[:8], "little")
    bad = {"truncated.safetensors": data[:8 + n + 10], "short.safetensors": data[:5],
           "header.safetensors": data[:8] + b"{" * n + data[8 + n:],
           "huge.safetensors": (1 << 40).to_bytes(8, "little") + data[8:],
           "foreign.safetensors": (2).to_bytes(8, "little") + b"{}"}
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content)
        p = run(tmp_path / name)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and name in p.stderr, (name, p.stderr)
        assert "Traceback" not in p.stderr
        assert not (tmp_path / "out" / name).exists()


# The H200's captures of 2026-12-04 that no earlier capture had: the backwards past one tile (S4:
# N 256, D 64: flash's two row and key blocks, the efficient kernel's four key splits), flash's at
# D 128 (S5) and the FP16 backwards (S1), one causal random case each (the rest, by hand: docs/gpu.md)
H200_CASES = (r"^S4\.(flash|efficient)\.bf16\.random\.causal\.grad$|^S5\.flash\.bf16\.random\.causal\.grad$"
              r"|^S1\.(flash|efficient)\.f16\.random\.causal\.grad$")


def test_the_backwards_past_one_tile_at_d_128_and_in_fp16_are_reproduced_on_the_h200(tmp_path):
    r = ingest("C", tmp_path, "--cases", H200_CASES, golden=H200)
    got = {(e["file"], e["case"]): e for e in r["sdpa"]}
    assert sorted(got) == [("sdpa_S1_f16_bwd.safetensors", "efficient.f16.random.causal"),
                           ("sdpa_S1_f16_bwd.safetensors", "flash.f16.random.causal"),
                           ("sdpa_S4_bf16_bwd.safetensors", "efficient.bf16.random.causal"),
                           ("sdpa_S4_bf16_bwd.safetensors", "flash.bf16.random.causal"),
                           ("sdpa_S5_bf16_bwd.safetensors", "flash.bf16.random.causal")]
    for (_, case), e in got.items():
        recipe = "torch-efficient-sm90" if case.startswith("efficient") else "torch-flash-sm90"
        assert e[recipe]["matched"] == e[recipe]["total"] and {"dq", "dk", "dv"} <= e[recipe]["outputs"].keys(), e
        # negative control: FlashAttention-2's generic recipe misses bits of every one
        fa2 = e["fa2-f16" if ".f16." in case else "fa2-bf16"]
        assert fa2["matched"] < fa2["total"], e


def sdpa_tensors(archive, name):
    """{key: tensor} of one capture file inside a phase's C-sdpa archive."""
    import tarfile

    from safetensors.torch import load

    with tarfile.open(archive) as tar:
        return load(tar.extractfile(f"sdpa/{name}").read())


def same_bits(a, b):
    import torch

    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_the_h200_gives_the_h100s_bits_for_every_backend():
    """PyTorch's kernels are the same machine code on both parts: every capture the two share
    (S1 forward in BF16 and FP16 and backward in BF16, every backend; S3's BF16 forward) is equal
    bit for bit, so the recipes fitted on the H100 hold on the H200."""
    shared = 0
    for name in ("sdpa_S1_bf16_fwd.safetensors", "sdpa_S1_f16_fwd.safetensors", "sdpa_S1_bf16_bwd.safetensors",
                 "sdpa_S3_bf16_fwd.safetensors"):
        h100 = sdpa_tensors(GOLDEN / "phase-C" / "C-sdpa.tar.xz", name)
        h200 = sdpa_tensors(H200 / "phase-C" / "C-sdpa.tar.xz", name)
        assert h100.keys() <= h200.keys(), name
        for key in h100:
            assert same_bits(h100[key], h200[key]), (name, key)
        shared += len(h100)
    assert shared == 56 + 56 + 72 + 56


def test_pytorchs_deterministic_mode_makes_flashs_backward_deterministic():
    """S3 (1000 queries and keys, D 128: 8 key blocks of 128 add into each dQ row) on the H200:
    the default flash backward gave different bits on two runs in all four cases, and under
    torch.use_deterministic_algorithms(True) the same bits, by another instantiation of the same
    kernels (flash_bwd_dot_do_o_kernel<false>, after fills of its buffers); dK and dV (no
    atomics) are the same in both modes, dQ not always (a model of that mode is still to come)."""
    import tarfile

    with tarfile.open(H200 / "phase-C" / "C-sdpa.tar.xz") as tar:
        cases = json.loads(tar.extractfile("sdpa/sdpa_cases.json").read())
    s3 = [c for c in cases if c["shape"] == "S3" and c["pass"] == "backward" and c["backend"].startswith("flash")]
    default = [c for c in s3 if c["backend"] == "flash"]
    strict = [c for c in s3 if c["backend"] == "flash-deterministic"]
    assert len(default) == len(strict) == 4
    assert not any(c["deterministic"] for c in default) and all(c["deterministic"] for c in strict)
    kernels = [c for c in strict if c.get("kernels")][0]["kernels"]
    assert any(k.startswith("void pytorch_flash::flash_bwd_dot_do_o_kernel<false") for k in kernels)
    assert not any(c.get("warnings") for c in strict)
    grads = sdpa_tensors(H200 / "phase-C" / "C-sdpa.tar.xz", "sdpa_S3_bf16_bwd.safetensors")
    differ = set()
    for key in grads:
        if key.startswith("flash."):
            if not same_bits(grads[key], grads["flash-deterministic." + key[len("flash."):]]):
                differ.add(key)
    assert differ == {"flash.bf16.random.full.dq", "flash.bf16.random.causal.dq"}
