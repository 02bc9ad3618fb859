"""The latency-aware model of a main loop (tools/gpu/sass_schedule.py) on written SASS: a
dependent chain costs its latencies, independent work its issue slots or its pipe's interval, two
warps hide each other's latencies but share the issue slot and the pipes, a DEPBAR waits for its
group, wgmmas queue on the tensor core, and the operands are read as SASS writes them."""
import sys

import pytest
from sass_listing import ROOT, listing

sys.path.insert(0, str(ROOT / "tools" / "gpu"))

import sass_estimate as est  # noqa: E402
import sass_schedule as sch  # noqa: E402


def ops_of(lines):
    code = est.functions(listing(lines), predicates=True)["_Z6kernel"]
    return [sch.decode(op, full, operands, guard) for _a, op, full, operands, guard in code]


def test_operands_as_sass_writes_them():
    op = ops_of(["ISETP.GE.AND P0, PT, R4, R5, PT"])[0]
    assert (op.pipe, op.writes, op.reads) == ("alu", ["P0"], ["R4", "R5"])
    op = ops_of(["@!P1 FFMA R1, -R2.reuse, |R3|, R1"])[0]
    assert (op.pipe, op.writes, sorted(op.reads)) == ("fp32", ["R1"], ["P1", "R1", "R2", "R3"])
    op = ops_of(["SHFL.BFLY PT, R5, R6, 0x1, 0x1f"])[0]
    assert (op.pipe, op.writes, op.reads) == ("shfl", ["R5"], ["R6"])
    op = ops_of(["STS [R2+0x10], R7"])[0]
    assert (op.writes, sorted(op.reads)) == ([], ["R2", "R7"])
    op = ops_of(["IMAD.WIDE.U32 R4, R3, 0x4, RZ"])[0]
    assert (op.pipe, op.writes) == ("imad", ["R4", "R5"])
    op = ops_of(["HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR12].tnspB, R88, gsb0"])[0]
    assert op.pipe == "tensor" and op.commits and op.macs == 64 * 128 * 16
    assert op.writes == [f"R{88 + k}" for k in range(64)] and op.reads == ["R152", "R153", "R154", "R155"]
    assert ops_of(["WARPGROUP.DEPBAR.LE gsb0, 0x1"])[0].depbar == 1
    assert ops_of(["WARPGROUP.ARRIVE"])[0].fence


def test_a_dependent_chain_costs_its_latencies_and_independent_work_its_slots():
    chain = ops_of([f"FADD R1, R1, R{i + 2}" for i in range(16)])
    assert sch.simulate(chain, warps=1) == 16 * sch.LATENCY["fp32"]
    # a second warp fills the first one's latency: the same time for twice the work
    assert sch.simulate(chain, warps=2) == 16 * sch.LATENCY["fp32"]
    free = ops_of([f"FADD R{i + 20}, R1, R2" for i in range(16)])
    assert sch.simulate(free, warps=1) == 16  # one issue a cycle
    assert sch.simulate(free, warps=2) == 32  # two warps share the slot


def test_a_pipe_takes_a_warp_instruction_every_interval():
    mufu = ops_of([f"MUFU.EX2 R{i + 20}, R1" for i in range(8)])
    assert sch.simulate(mufu, warps=1) == 8 * sch.INTERVAL["xu"]
    assert sch.simulate(mufu, warps=2) == 16 * sch.INTERVAL["xu"]  # the two warps' MUFUs queue
    alu = ops_of([f"LOP3.LUT R{i + 20}, R1, R2, R3, 0x96, !PT" for i in range(8)])
    assert sch.simulate(alu, warps=1) == 8 * sch.INTERVAL["alu"]


def test_a_depbar_waits_for_its_group_and_wgmmas_queue_on_the_tensor_core():
    gemm = ["WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0"]
    waited = ops_of(gemm + ["WARPGROUP.DEPBAR.LE gsb0, 0x0", "FADD R2, R24, R25"])
    tensor = 64 * 128 * 16 / 4 / sch.TENSOR_MACS_PER_CYCLE_SMSP  # this sub-partition's quarter
    one = sch.simulate(waited, warps=1)
    # an iteration: the fence waits for the add's result (wgmma.fence orders the registers), the
    # wgmma's slot, its time on the tensor core and its latency, the DEPBAR's slot
    assert one == sch.LATENCY["fp32"] + 1 + tensor + sch.HGMMA_LATENCY + 1
    # two warps: their wgmmas take turns on the tensor core, whose time bounds the pair
    assert sch.simulate(waited, warps=2) == 2 * tensor
    # a DEPBAR that leaves one group in flight lets one warp keep the tensor core busy
    pipelined = ops_of(gemm + ["WARPGROUP.DEPBAR.LE gsb0, 0x1", "FADD R2, R3, R4"])
    assert sch.simulate(pipelined, warps=1) == tensor


def test_the_latencies_are_restored_after_the_range():
    chain = ops_of(["MUFU.EX2 R1, R1"] * 4)
    before = dict(sch.LATENCY), sch.HGMMA_LATENCY
    r = sch.scheduled_range(chain, warps=1)
    assert r["half"] < r["stated"] < r["double"]
    assert (dict(sch.LATENCY), sch.HGMMA_LATENCY) == before


def test_an_empty_loop_is_refused():
    with pytest.raises(ValueError):
        sch.simulate([], warps=1)
