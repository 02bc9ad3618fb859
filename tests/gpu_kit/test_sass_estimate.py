"""The SASS estimate (tools/gpu/sass_estimate.py): on a written SASS listing, the main loop is the
backward branch's body with the most HGMMAs (not an out-of-line retry that branches back over
it), its instructions are counted by pipe and the cycles per tile follow the stated rates; on the
Hopper kernel compiled for sm_90a here (where nvcc and cuobjdump are), no register spills and no
local memory, and every wgmma of a tile in the main loop; bad arguments exit 2."""
import pathlib
import shutil
import subprocess
import sys

import pytest
from sass_listing import NVCC, ROOT, compile_hopper_kernel, listing

sys.path.insert(0, str(ROOT / "tools" / "gpu"))

import sass_estimate as est  # noqa: E402


LOOP = [
    "S2R R0, SR_TID.X",             # 0
    "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",  # 1: loop head
    "FFMA R1, R2, R3, R4",          # 2
    "FMUL R1, R2, R3",              # 3
    "LOP3.LUT R5, R6, R7, R8, 0x96, !PT",  # 4
    "MUFU.EX2 R9, R10",             # 5
    "HGMMA.64x64x16.F32.BF16 R40, R12, gdesc[UR8], R40",  # 6
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R1",  # 7
    "@!P0 BRA 0x00b0",              # 8: to the retry stub
    "BRA 0x0010",                   # 9: the loop's back edge
    "EXIT",                         # 10
    "BRA 0x0070",                   # 11: retry stub, back into the loop (spans less)
    "BRA 0x0000",                   # 12: a stub back to the start (spans everything)
]


def test_the_main_loop_and_its_pipes():
    code = est.functions(listing(LOOP))["_Z6kernel"]
    assert est.main_loop(code) == (1, 9)
    body, pipes, macs, cycles, overlapped, serial = est.estimate(code, (1, 9), 8)
    assert len(body) == 9
    assert pipes == {"tensor": 2, "fp32": 2, "int": 1, "xu": 1, "control": 3}
    assert macs == 2 * (1024 * 128 + 1024 * 64)  # two warpgroups
    assert cycles["tensor"] == macs / 2048 and cycles["issue"] == 8 * 9 / 4
    assert cycles["xu"] == 8 * 1 / 0.5 and cycles["fp32"] == 8 * 2 / 4
    assert overlapped == max(cycles.values()) and serial == cycles["tensor"] + cycles["issue"]


def test_fp8_qgmma_counts_twice_the_flops_in_the_same_tensor_time():
    # a QGMMA 64 x N x 32 (FP8) multiplies twice an HGMMA 64 x N x 16's elements at twice the rate
    fp8 = [line.replace("HGMMA.64x128x16.F32.BF16", "QGMMA.64x128x32.F32.E4M3.E4M3")
           .replace("HGMMA.64x64x16.F32.BF16", "QGMMA.64x64x32.F32.E4M3.E4M3") for line in LOOP]
    bf16_code, fp8_code = (est.functions(listing(x))["_Z6kernel"] for x in (LOOP, fp8))
    assert est.main_loop(fp8_code) == (1, 9)
    _b, pipes, macs, cycles, _o, _s = est.estimate(fp8_code, (1, 9), 8)
    _b, _p, bf16_macs, bf16_cycles, _o, _s = est.estimate(bf16_code, (1, 9), 8)
    assert pipes["tensor"] == 2 and macs == 2 * bf16_macs
    assert cycles["tensor"] == bf16_cycles["tensor"]


def test_retry_stubs_after_exit_are_no_loop_ends():
    # two loops of one HGMMA each (a masked tile's and a whole tile's) and, after EXIT, a retry
    # stub branching back over both: the main loop is the smaller loop, not the stub's span
    code = est.functions(listing([
        "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",  # 0: the masked loop
        "FSEL R1, R2, -INF , !P3",                              # 1
        "@!P0 BRA 0x0000",                                      # 2
        "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",  # 3: the whole loop
        "@!P0 BRA 0x0030",                                      # 4
        "EXIT",                                                 # 5
        "BRA 0x0000",                                           # 6: a stub over both
    ]))["_Z6kernel"]
    assert est.main_loop(code) == (3, 4)


def test_no_loop_with_hgmma_exits_1(tmp_path, capsys):
    f = tmp_path / "k.sass"
    f.write_text(listing(["FFMA R1, R2, R3, R4", "BRA 0x0000", "EXIT"]))
    assert est.main([f"--sass={f}", "--kernel", "kernel"]) == 1


def test_the_launch_pays_its_fill_drain_and_last_wave():
    code = est.functions(listing(LOOP), predicates=True)["_Z6kernel"]
    sched = est.schedule(code, (1, 9), 8, (1, 2, 300))
    # 300 keys: 3 tiles of 128 (the S wgmma's N); 2 heads x 3 blocks of 128 rows: 6 blocks, one wave
    assert (sched["block_n"], sched["tiles"], sched["blocks"], sched["waves"]) == (128, 3, 6, 1)
    assert sched["fill_drain"] > est.MEMORY_ROUND_TRIP_CYCLES
    for k, cycles in sched["launch_cycles"].items():
        assert cycles == 3 * sched["steady"][k] + sched["fill_drain"]
    more = est.schedule(code, (1, 9), 8, (1, 89, 300))  # 267 blocks: three waves on 132 SMs
    assert more["waves"] == 3 and more["launch_cycles"]["stated"] == 3 * sched["launch_cycles"]["stated"]


@pytest.mark.parametrize("args", [[], ["x.o", "--sass", "y"], ["x.o", "--warps", "6"], ["x.o", "--kernel", "("],
                                  ["x.o", "--shape", "1,2"], ["x.o", "--shape", "1,0,4"], ["x.o", "--shape", "a,b,c"]])
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as e:
        est.main(args)
    assert e.value.code == 2


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the kernel's SASS cannot be made here")
def test_the_hopper_kernel_has_no_spills_and_its_wgmmas_in_the_loop(tmp_path):
    obj = tmp_path / "hopper_flash.o"
    compiled = compile_hopper_kernel(obj)
    assert compiled.returncode == 0, compiled.stderr
    tool = est.default_cuobjdump()
    assert shutil.which(tool) or pathlib.Path(tool).exists(), "no cuobjdump (PATH or triton's) beside nvcc"
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / "sass_estimate.py"), str(obj), "--json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    # D 64 and 128; the software exp2, ex2.approx and ex2.approx.ftz; two exp2 arguments; P scaled or not
    assert len(lines) == 24
    for line in lines:
        d = 128 if "ILi128" in line["kernel"] else 64
        assert line["resources"]["STACK"] == 0 and line["resources"]["LOCAL"] == 0, line
        assert line["pipes"]["tensor"] == d // 16 + 8, line  # S's D / 16 and P V's 8 k16 steps
        assert line["tile_macs"] == 2 * 128 * 128 * d, line
        # the schedule cannot beat the pipes' bound (latencies are not monotone under a greedy
        # scheduler: halving them can cost a few cycles); the launch pays fill and waves
        t = line["tflops_scheduled"]
        assert max(t.values()) <= line["tflops_overlapped"] + 0.1 and t["double"] <= t["stated"] + 0.1, line
        k = line["launch"]
        assert k["shape"] == [1, 64, 4096] and k["blocks"] == 64 * 32 and k["waves"] == 16, line
        assert all(k["tflops"][x] < t[x] for x in t), line
    # ex2.approx.ftz (Exp2Kind 3) drops the non-ftz form's guard: fewer instructions in the loop
    # than ex2.approx (Exp2Kind 1), the same MUFU count
    loop = {(d, kind, arg, scaled): line for line in lines for d in (64, 128) for kind in (1, 3) for arg in (0, 1)
            for scaled in (0, 1) if f"ILi{d}E" in line["kernel"] and f"Exp2KindE{kind}E" in line["kernel"]
            and f"Exp2ArgE{arg}ELb{scaled}E" in line["kernel"]}
    for d in (64, 128):
        for arg in (0, 1):
            for scaled in (0, 1):
                ftz, approx = loop[d, 3, arg, scaled], loop[d, 1, arg, scaled]
                assert ftz["loop_instructions"] < approx["loop_instructions"], (ftz, approx)
                assert ftz["pipes"]["xu"] == approx["pipes"]["xu"]
            # P unscaled (p_scale 1, h100-bf16's) drops a multiply a score
            assert loop[d, 3, arg, 0]["loop_instructions"] < loop[d, 3, arg, 1]["loop_instructions"]
