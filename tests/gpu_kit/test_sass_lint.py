"""The SASS lint (tools/gpu/sass_lint.py): on written listings, an instruction that touches an
HGMMA's accumulators or overwrites its A registers before the WARPGROUP.DEPBAR of its group is a
hazard, as is an HGMMA with no WARPGROUP.ARRIVE since the last DEPBAR, while reads of A, chains
over the same accumulators, DEPBAR.LE 1 and code after an unconditional branch are not; on the
Hopper kernel compiled for sm_90a here (where nvcc is): no hazard in any of its 24 kernels, no
ptxas warning that it serialized the wgmmas, and the same listing with one accumulator read moved
before its DEPBAR is caught. Bad arguments exit 2."""
import subprocess
import sys

import pytest
from sass_listing import NVCC, ROOT, compile_hopper_kernel, listing

sys.path.insert(0, str(ROOT / "tools" / "gpu"))

import sass_estimate as est  # noqa: E402
import sass_lint  # noqa: E402


def hazards(lines):
    return sass_lint.lint(est.functions(listing(lines), predicates=True)["_Z6kernel"])


S_CHAIN = ["WARPGROUP.ARRIVE",
           "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], RZ, !UPT",   # R24..R87
           "IADD3 R2, R2, 0x1, RZ",                                 # unrelated: fine
           "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0"]
PV_CHAIN = ["WARPGROUP.ARRIVE",
            "HGMMA.64x64x16.F32.BF16 R88, R4, gdesc[UR8].tnspB, R88",  # A in R4..R7, D R88..R119
            "FMUL R9, R4, R5",                                       # reads A: fine
            "F2FP.BF16.F32.PACK_AB R8, R10, R11",                    # the next step's A: fine
            "HGMMA.64x64x16.F32.BF16 R88, R8, gdesc[UR8].tnspB, R88, gsb0"]
WAIT = ["WARPGROUP.DEPBAR.LE gsb0, 0x0"]


def test_clean_chains_pass():
    assert hazards(S_CHAIN + WAIT + ["FMNMX R2, R24, R25, !PT"] + PV_CHAIN + WAIT + ["FADD R3, R88, R2"]) == []


def test_an_accumulator_read_before_the_wait_is_a_hazard():
    h = hazards(S_CHAIN + ["FMNMX R2, R30, R2, !PT"] + WAIT)
    assert len(h) == 1 and "touches accumulators" in h[0] and "/*0040*/ FMNMX" in h[0]
    # a 64-bit load into R86:R87 writes two of them
    assert len(hazards(S_CHAIN + ["LDS.64 R86, [R3]"] + WAIT)) == 1
    assert hazards(S_CHAIN + ["LDS.64 R88, [R3]"] + WAIT) == []


def test_overwriting_a_pending_a_operand_is_a_hazard_reading_it_is_not():
    h = hazards(PV_CHAIN[:2] + ["MOV R5, R2"] + PV_CHAIN[2:] + WAIT)
    assert len(h) == 1 and "overwrites the A registers" in h[0]
    assert hazards(PV_CHAIN[:2] + ["STS [R3], R5"] + PV_CHAIN[2:] + WAIT) == []  # a store reads R5


def test_a_wait_for_all_but_one_group_leaves_the_newest_in_flight():
    two_groups = S_CHAIN + ["WARPGROUP.ARRIVE", "HGMMA.64x64x16.F32.BF16 R88, gdesc[UR8], RZ, !UPT, gsb0",
                            "WARPGROUP.DEPBAR.LE gsb0, 0x1"]
    assert hazards(two_groups + ["FADD R2, R24, R25"]) == []  # the older group (S) is done
    assert len(hazards(two_groups + ["FADD R2, R88, R25"])) == 1  # the newer is not


def test_an_hgmma_without_arrive_and_unconditional_branches():
    assert "no WARPGROUP.ARRIVE" in hazards(S_CHAIN + WAIT + PV_CHAIN[1:] + WAIT)[0]
    # a guarded branch falls through with the wgmmas in flight; after an unconditional one the
    # code is reached from elsewhere
    assert len(hazards(S_CHAIN + ["@P0 BRA 0x0000", "FADD R2, R24, R25"] + WAIT)) == 1
    assert hazards(S_CHAIN + ["BRA 0x0000", "FADD R2, R24, R25"] + WAIT) == []


@pytest.mark.parametrize("args", [[], ["x.o", "--sass", "y"], ["x.o", "--kernel", "("]])
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as e:
        sass_lint.main(args)
    assert e.value.code == 2


def test_no_matching_function_exits_2(tmp_path):
    f = tmp_path / "k.sass"
    f.write_text(listing(S_CHAIN + WAIT))
    assert sass_lint.main(["--sass", str(f), "--kernel", "nothing"]) == 2
    assert sass_lint.main(["--sass", str(f), "--kernel", "kernel"]) == 0
    f.write_text(listing(S_CHAIN + ["FADD R2, R24, R25"] + WAIT))
    assert sass_lint.main(["--sass", str(f), "--kernel", "kernel"]) == 1


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine: the kernel's SASS cannot be made here")
def test_the_hopper_kernel_has_no_wgmma_hazard(tmp_path):
    obj = tmp_path / "hopper_flash.o"
    p = compile_hopper_kernel(obj)
    assert p.returncode == 0, p.stderr
    assert "serialized" not in p.stderr, p.stderr  # ptxas: "wgmma.mma_async instructions are serialized"
    sass = subprocess.run([est.default_cuobjdump(), "-sass", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    kernels = {n: c for n, c in est.functions(sass, predicates=True).items() if "forward_kernel" in n}
    assert len(kernels) == 24  # D 64 and 128, three exp2s, two forms of its argument, P scaled or not
    for name, code in kernels.items():
        assert sum(c[1] == "HGMMA" for c in code) >= 12, name
        assert sass_lint.lint(code) == [], name
    # the negative control: the first DEPBAR moved after the instruction that follows it
    name, code = next(iter(kernels.items()))
    i = next(j for j, c in enumerate(code) if c[2].startswith("WARPGROUP.DEPBAR"))
    j = next(k for k in range(i + 1, len(code)) if sass_lint.REGISTER.search(code[k][3])
             and sass_lint.registers(code[k][3], 1) & set(range(24, 88)))
    moved = code[:i] + code[i + 1:j + 1] + [code[i]] + code[j + 1:]
    assert any("touches accumulators" in h for h in sass_lint.lint(moved)), (name, code[j])
