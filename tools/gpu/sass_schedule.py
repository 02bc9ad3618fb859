"""A latency-aware model of a Hopper flash-attention main loop: the loop's SASS issued in order
by the warps of one SM sub-partition (SMSP), cycle by cycle, with each instruction waiting for
its operands (register and predicate scoreboards with the latencies below), for its pipe (each
pipe takes a warp instruction every `interval` cycles) and for the one issue slot a cycle; the
wgmmas (HGMMA; QGMMA for FP8, at twice the multiply-adds a cycle) queue on the sub-partition's
quarter of the tensor cores and a
`WARPGROUP.DEPBAR.LE gsb0, K` waits until at most K of the warp's committed groups are in
flight. What sass_estimate.py's pipe counts cannot see: the dependent chains of the row max and
the row sum, MUFU's latency, a warp waiting for its own GEMMs, and one scheduler serving both
the ALU work and the issue of two warps.

Every rate and latency is an assumption, stated in ASSUMPTIONS and in docs/performance.md:
per-SM throughputs from NVIDIA's CUDA C++ Programming Guide (compute capability 9.0: 128 FP32
multiply-adds, 64 integer/compare/min-max/logic operations, 16 special-function results and
32 shuffle lanes a cycle), split over the four sub-partitions; latencies are microbenchmark
orders of magnitude, not measurements of this machine, so the model is run at half and twice
them too (`scheduled_range`). Straight-line code: both sides of a branch are issued, as in the
pipe counts. Not modelled: the producer warp's few instructions, TMA and L2 bandwidth (the
mbarrier waits are taken as already satisfied), instruction-cache misses, register-bank
conflicts and the clock dropping below 1830 MHz under load.
"""
import re
from dataclasses import dataclass, field

# pipe -> cycles between two warp instructions on one sub-partition (per-SM rate / 4)
INTERVAL = {"fp32": 1, "imad": 2, "alu": 2, "xu": 8, "shfl": 4, "lsu": 4, "uniform": 1, "control": 1}
# pipe -> cycles from issue until a dependent instruction may issue
LATENCY = {"fp32": 4, "imad": 4, "alu": 4, "xu": 18, "shfl": 24, "lsu": 30, "uniform": 2, "control": 1}
HGMMA_LATENCY = 32  # cycles from a wgmma leaving the tensor core's queue until its registers are written
TENSOR_MACS_PER_CYCLE_SMSP = 512  # 2048 dense BF16 multiply-adds an SM, four tensor cores
ASSUMPTIONS = {"interval": INTERVAL, "latency": LATENCY, "hgmma_latency": HGMMA_LATENCY,
               "tensor_macs_per_cycle_per_smsp": TENSOR_MACS_PER_CYCLE_SMSP,
               "mbarrier_waits": "satisfied (the producer keeps ahead)", "branches": "both sides issued"}

FP32 = {"FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "HFMA2", "HMUL2", "HADD2"}
ALU = {"ISETP", "LOP3", "SHF", "IADD3", "SEL", "FSEL", "FSETP", "FMNMX", "PRMT", "LEA", "PLOP3", "VIADD",
       "IABS", "FLO", "POPC", "F2FP", "MOV", "IMNMX", "VIMNMX", "BMSK", "SGXT", "LOP", "CS2R", "P2R", "R2P",
       "VOTE", "IADD"}
XU = {"MUFU", "F2I", "I2F", "F2F", "FRND", "I2FP", "F2IP", "S2R"}
LSU = {"LDS", "STS", "LDSM", "STSM", "ATOMS", "LDG", "STG", "LDC", "LD", "ST", "RED", "ATOMG", "SYNCS",
       "UTMALDG", "UTMASTG", "UBLKCP"}
STORES = {"STS", "STSM", "STG", "ST", "RED", "BAR", "BRA", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "NOP",
          "UTMALDG", "UTMASTG", "UBLKCP", "WARPGROUP", "DEPBAR", "RET", "CALL"}
REGISTER = re.compile(r"(?<![A-Za-z0-9_])(U?R\d+|U?P[0-6])(?![0-9])")
# a wgmma's N (group 1) and K (group 2): HGMMA 64 x N x 16 (16-bit inputs), QGMMA 64 x N x 32 (FP8)
HGMMA_SHAPE = re.compile(r"[HQ]GMMA\.64x(\d+)x(16|32)")
GMMA = {"HGMMA", "QGMMA"}


def bf16_equivalent_macs(full):
    """A wgmma's tensor time as BF16 multiply-adds: 64 N 16 for HGMMA, and for QGMMA too (64 N 32
    FP8 multiply-adds at twice the rate: 989 dense BF16 and 1979 dense FP8 TFLOP/s quoted)."""
    return 64 * int(HGMMA_SHAPE.search(full).group(1)) * 16
DEPBAR = re.compile(r"gsb0,\s*0x([0-9a-f]+)")


def pipe_of(opcode, full):
    if opcode == "IMAD":
        return "imad"
    if opcode in FP32:
        return "fp32"
    if opcode in ALU:
        return "alu"
    if opcode in XU:
        return "xu"
    if opcode == "SHFL":
        return "shfl"
    if opcode in LSU:
        return "lsu"
    if opcode.startswith("U") or opcode in ("R2UR", "S2UR"):
        return "uniform"
    return "control"


def _width(full):
    return 4 if ".128" in full else 2 if (".64" in full or ".WIDE" in full) else 1


def _registers(text, width=1):
    out = []
    for name in REGISTER.findall(text):
        if name in ("PT", "UPT"):
            continue
        prefix, number = ("UR", name[2:]) if name.startswith("UR") else ("R", name[1:]) \
            if name.startswith("R") else (name[:-1], name[-1])
        if prefix in ("R", "UR") and number == "Z":
            continue
        n = int(number)
        out += [f"{prefix}{n + k}" for k in range(width)] if prefix in ("R", "UR") else [name]
    return out


@dataclass
class Op:
    """One instruction as the scheduler sees it."""
    opcode: str
    pipe: str
    reads: list
    writes: list
    macs: int = 0            # a wgmma's multiply-adds for its warpgroup, as BF16's (tensor time)
    commits: bool = False    # an HGMMA closing a commit group (gsb0)
    depbar: int = -1         # WARPGROUP.DEPBAR.LE's K
    fence: bool = False      # WARPGROUP.ARRIVE: the warp's register writes land first


def decode(opcode, full, operands, guard=""):
    """An Op from one SASS instruction (the tuple functions() returns, and its guard)."""
    parts = [p.strip() for p in operands.split(",")] if operands.strip() else []
    reads = _registers(guard)
    if opcode in GMMA:
        n = int(HGMMA_SHAPE.search(full).group(1))
        dest = int(parts[0][1:])
        acc = [f"R{dest + k}" for k in range(n // 2)]
        a = _registers(parts[1], 4) if parts[1].startswith("R") else []
        return Op(opcode, "tensor", reads + a, acc, macs=bf16_equivalent_macs(full), commits="gsb0" in operands)
    if opcode == "WARPGROUP":
        m = DEPBAR.search(operands)
        if ".DEPBAR" in full and m:
            return Op(opcode, "control", reads, [], depbar=int(m.group(1), 16))
        return Op(opcode, "control", reads, [], fence=".ARRIVE" in full)
    pipe = pipe_of(opcode, full)
    if opcode in STORES or not parts:
        return Op(opcode, pipe, reads + _registers(", ".join(parts)), [])
    ndest = 2 if (opcode.endswith("SETP") or opcode in ("SHFL", "PLOP3")) else 1
    writes = []
    for p in parts[:ndest]:
        writes += _registers(p, _width(full) if p.startswith("R") else 1)
    for p in parts[ndest:]:
        reads += _registers(p, _width(full) if p.startswith("R") and not p.startswith("[") else 1)
    return Op(opcode, pipe, reads, writes)


@dataclass
class _Warp:
    ops: list
    iterations: int
    pc: int = 0
    done: int = 0
    ready: dict = field(default_factory=dict)        # register -> cycle its value can be read
    tensor_written: set = field(default_factory=set)  # registers an in-flight HGMMA will write
    groups: list = field(default_factory=list)       # committed groups' completion cycles
    open_group: int = 0                              # the current group's last completion
    last_issue: int = -1
    finished: list = field(default_factory=list)     # cycle each iteration's last op issued


def _can_issue(w, op, now, pipe_free):
    if op.depbar >= 0:
        return sum(t > now for t in w.groups) <= op.depbar
    if op.fence:
        return all(t <= now for r, t in w.ready.items() if r not in w.tensor_written)
    if op.pipe != "tensor" and pipe_free.get(op.pipe, 0) > now:
        return False
    for r in op.reads + op.writes:  # a wgmma chains on its own accumulators in the tensor core
        if w.ready.get(r, 0) > now and not (op.pipe == "tensor" and r in w.tensor_written):
            return False
    return True


def simulate(ops, warps=2, iterations=12, max_cycles=10_000_000):
    """Cycles per iteration in the steady state (the last half of `iterations`, slowest warp)
    of `warps` warps sharing one sub-partition, each running `ops` in order."""
    if not ops:
        raise ValueError("no instructions to schedule")
    ws = [_Warp(ops, iterations) for _ in range(warps)]
    pipe_free, tensor_free, now = {}, 0, 0
    while any(w.done < w.iterations for w in ws):
        if now > max_cycles:
            raise RuntimeError("the schedule does not progress (a DEPBAR waiting for a group never committed?)")
        # oldest first: the warp that issued longest ago gets the slot
        for w in sorted((w for w in ws if w.done < w.iterations), key=lambda w: w.last_issue):
            op = w.ops[w.pc]
            if not _can_issue(w, op, now, pipe_free):
                continue
            if op.pipe == "tensor":
                start = max(now, tensor_free)
                tensor_free = start + op.macs / 4 / TENSOR_MACS_PER_CYCLE_SMSP
                complete = tensor_free + HGMMA_LATENCY
                for r in op.writes:
                    w.ready[r] = complete
                w.tensor_written.update(op.writes)
                w.open_group = max(w.open_group, complete)
                if op.commits:
                    w.groups.append(w.open_group)
                    w.open_group = 0
            else:
                if op.depbar >= 0:
                    w.tensor_written = {r for r in w.tensor_written if w.ready.get(r, 0) > now}
                    w.groups = [t for t in w.groups if t > now]
                else:
                    pipe_free[op.pipe] = now + INTERVAL[op.pipe]
                for r in op.writes:
                    w.ready[r] = now + LATENCY[op.pipe]
                    w.tensor_written.discard(r)
            w.last_issue = now
            w.pc += 1
            if w.pc == len(w.ops):
                w.pc = 0
                w.done += 1
                w.finished.append(now)
            break  # one issue slot a cycle
        now += 1
    half = iterations // 2
    return max((w.finished[-1] - w.finished[half - 1]) / (iterations - half) for w in ws)


def scheduled_range(ops, warps=2, iterations=12):
    """Cycles per iteration at the stated latencies, and at half and twice them (not monotone:
    a greedy schedule can lose a few cycles when a latency shrinks)."""
    global HGMMA_LATENCY
    saved, saved_h = dict(LATENCY), HGMMA_LATENCY
    out = {}
    try:
        for name, factor in (("half", 0.5), ("stated", 1.0), ("double", 2.0)):
            for k, v in saved.items():
                LATENCY[k] = max(1, round(v * factor))
            HGMMA_LATENCY = max(1, round(saved_h * factor))
            out[name] = simulate(ops, warps, iterations)
    finally:
        LATENCY.update(saved)
        HGMMA_LATENCY = saved_h
    return out
