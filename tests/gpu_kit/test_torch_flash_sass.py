"""The SASS canary of PyTorch's flash forward (tools/gpu/torch_flash_sass.py): on the installed
CUDA wheel the op order the torch-flash-sm90 recipe models holds, and a change to any part of
it (an FFMA exp2 argument, an unguarded MUFU.EX2, another reduction order, other products, no
LG2 guard) is reported; the same for the split-KV combine kernel (libdevice's expf and logf, the
lane butterflies, the O chain and cast)."""
import pathlib
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools" / "gpu"
sys.path.insert(0, str(TOOLS))

import torch_flash_sass as canary  # noqa: E402

# A few lines in the kernel's own shape: one guarded exp2 of an FADD-made argument, the
# quad reduction, 1/l, the LSE and a cast.
GOOD = [
    "HMMA.16816.F32.BF16 R4, R8, R12, R4",
    "FMNMX R20, R4, R5, !PT",
    "SHFL.BFLY PT, R21, R20, 0x2, 0x1f",
    "SHFL.BFLY PT, R22, R21, 0x1, 0x1f",
    "FMUL R30, R4, UR4",
    "FADD R31, -R16, R30",
    "FSETP.GEU.AND P1, PT, R31, -126, PT",
    "@!P1 FMUL R31, R31, 0.5",
    "MUFU.EX2 R32, R31",
    "@!P1 FMUL R32, R32, R32",
    "MUFU.RCP R40, R41",
    "@!P0 FMUL R50, R50, 16777216",
    "MUFU.LG2 R50, R50",
    "@!P0 FADD R50, R50, -24",
    "FMUL R51, R50, 0.69314718246459960938",
    "FFMA R52, R53, UR4, R51",
    "F2FP.BF16.F32.PACK_AB R60, R61, R62",
]


def complaints(lines):
    return canary.verdict(canary.analyse(lines))


def test_the_modelled_pattern_passes():
    assert complaints(GOOD) == []


@pytest.mark.parametrize("change, word", [
    (("FADD R31, -R16, R30", "FFMA R31, R4, UR4, -R16"), "UNFUSE_FMA"),
    (("FSETP.GEU.AND P1, PT, R31, -126, PT", "NOP"), "guard"),
    (("SHFL.BFLY PT, R21, R20, 0x2, 0x1f", "SHFL.BFLY PT, R21, R20, 0x1, 0x1f"), "quad reduction"),
    (("HMMA.16816.F32.BF16 R4, R8, R12, R4", "HMMA.16816.F16.F16 R4, R8, R12, R4"), "products"),
    (("@!P0 FMUL R50, R50, 16777216", "NOP"), "LSE"),
    (("MUFU.RCP R40, R41", "NOP"), "MUFU.RCP"),
    (("F2FP.BF16.F32.PACK_AB R60, R61, R62", "NOP"), "F2FP"),
])
def test_each_change_is_reported(change, word):
    old, new = change
    found = complaints([new if line == old else line for line in GOOD])
    assert found and any(word in x for x in found), found


# The split-KV combine's expf, logf, reductions and O in its own shape.
COMBINE_GOOD = [
    "IMAD.MOV.U32 R21, RZ, RZ, 0x3bbb989d", "IMAD.MOV.U32 R24, RZ, RZ, 0x437c0000",
    "SHFL.BFLY PT, R24, R29, 0x4, 0x1f", "FMNMX R24, R24, R29, !PT", "SHFL.BFLY PT, R35, R24, 0x2, 0x1f",
    "SHFL.BFLY PT, R20, R35, 0x1, 0x1f",
    "FFMA.SAT R21, R28, R21, 0.5", "FFMA.RM R24, R21, R24, 12582913", "FADD R7, R24, -12583039",
    "FFMA R7, R28, 1.4426950216293334961, -R7", "FFMA R28, R28, 1.925963033500011079e-08, R7", "MUFU.EX2 R21, R28",
    "SHFL.BFLY PT, R30, R21, 0x4, 0x1f", "SHFL.BFLY PT, R21, R30, 0x2, 0x1f", "SHFL.BFLY PT, R30, R21, 0x1, 0x1f",
    "IADD3 R23, R26, -0x3f2aaaab, RZ", "MOV R21, 0x3e055027", "FFMA R21, R22, -R21, 0.14084610342979431152",
    "FFMA R21, R22, R21, -0.12148627638816833496", "FFMA R21, R22, R21, 0.13980610668659210205",
    "FFMA R21, R22, R21, -0.16684235632419586182", "FFMA R21, R22, R21, 0.20012299716472625732",
    "FFMA R21, R22, R21, -0.24999669194221496582", "FFMA R21, R22, R21, 0.33333182334899902344",
    "FFMA R22, R23, 0.69314718246459960938, R22",
    "FFMA.SAT R2, R29, R2, 0.5", "FFMA.RM R7, R2, R7, 12582913", "MUFU.EX2 R2, R2",
    "FFMA R5, R4, R8, R5", "F2FP.BF16.F32.PACK_AB R2, R2, R5",
]


def combine_complaints(lines):
    return canary.verdict_combine(canary.analyse_combine(lines))


def test_the_combine_pattern_passes():
    assert combine_complaints(COMBINE_GOOD) == []


@pytest.mark.parametrize("change, word", [
    (("FFMA R7, R28, 1.4426950216293334961, -R7", "FFMA R7, R28, 1.4426950, -R7"), "expf"),
    (("FFMA R22, R23, 0.69314718246459960938, R22", "MUFU.LG2 R22, R23"), "logf"),
    (("SHFL.BFLY PT, R24, R29, 0x4, 0x1f", "SHFL.BFLY PT, R24, R29, 0x8, 0x1f"), "reductions"),
    (("FFMA.RM R7, R2, R7, 12582913", "FFMA R7, R2, R7, 12582913"), "expf"),
    (("F2FP.BF16.F32.PACK_AB R2, R2, R5", "NOP"), "F2FP"),
])
def test_each_combine_change_is_reported(change, word):
    old, new = change
    assert old in COMBINE_GOOD
    found = combine_complaints([new if line == old else line for line in COMBINE_GOOD])
    assert found and any(word in x for x in found), found


def test_the_installed_wheel_holds_the_pattern(tmp_path):
    p = subprocess.run([sys.executable, TOOLS / "torch_flash_sass.py", "--out", tmp_path / "facts.json"],
                       capture_output=True, text=True, timeout=600)
    torch = pytest.importorskip("torch")
    if torch.version.cuda is None:  # a CPU-only wheel has no kernel to read; a CUDA wheel must be read
        pytest.skip("a CPU-only torch wheel")
    assert p.returncode == 0, p.stdout + p.stderr
