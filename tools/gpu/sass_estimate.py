#!/usr/bin/env python3
"""An estimate of a flash-attention kernel's speed from its SASS, before any GPU runs it: the
kernel's main loop (the largest loop that holds wgmma instructions: HGMMA, or QGMMA for FP8), its
instructions counted by the pipe that executes them, and per 128 x block_n tile of one thread block the cycles each pipe
and the warp schedulers' issue need on an H100 SXM; the slowest of them bounds the tile, and
the tile's FLOPs over that time bound the speed. Registers, spills and shared memory from
cuobjdump's resource usage.

    sass_estimate.py BINARY [--kernel REGEX] [--cuobjdump PATH] [--warps 8] [--json]
    sass_estimate.py --sass FILE.sass [--resources FILE.txt] ...

BINARY: an object, library or executable with sm_90a code (cuobjdump reads it). Exit 0, 1 when
no kernel or no loop with a wgmma is found, 2 on bad arguments.

The model (H100 SXM5, sm_90: 132 SMs at 1830 MHz, the clock at which NVIDIA quotes 989 dense
BF16 TFLOP/s): per SM and cycle, 4 warp schedulers issue one instruction each; the FP32 pipes
take 4 warp instructions (FFMA, FMUL, FADD, and IMAD, which runs on the FMA pipe), the integer
and logic pipe 2, the special-function units (MUFU and conversions) 0.5, shared memory 1; the
tensor cores 2048 BF16 multiply-adds (an HGMMA 64 x N x 16 takes N / 2 cycles) or 4096 FP8 ones
(a QGMMA 64 x N x 32 takes N / 2 cycles as well). It counts each
loop instruction once (straight-line code: both sides of a branch are counted, a spin-wait
loop once), and assumes the pipes overlap perfectly ("overlapped") or that the tensor cores
and the rest take turns ("serial"). Then "scheduled" (sass_schedule.py): the loop issued in
order by the two consumer warps of one sub-partition, with latencies, pipe intervals, the
tensor core's queue and the DEPBAR waits, at the stated latencies and at half and twice them;
and "launch": that steady state over a whole launch of --shape B,H,N (non-causal), with each
block's fill and drain (one tile of a warp alone, plus a memory round trip) and the last wave
of blocks on the 132 SMs. An estimate, to be replaced by a measurement.
"""
import math
import json
import pathlib
import re
import shutil
import subprocess
import sys
from collections import Counter

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import Parser  # noqa: E402
import sass_schedule  # noqa: E402

CLOCK_HZ = 1.83e9
SMS = 132
ISSUE_PER_CYCLE = 4  # warp instructions per SM
THROUGHPUT = {  # warp instructions per SM per cycle
    "fp32": 4.0,
    "int": 2.0,
    "xu": 0.5,
    "shared": 1.0,
}
TENSOR_MACS_PER_CYCLE = 2048  # dense BF16 per SM
MEMORY_ROUND_TRIP_CYCLES = 1500  # a block's first Q and K loads from HBM and its O store (about 0.8 us)
BLOCK_M = 128  # query rows a block: two consumer warpgroups of 64

PIPES = {
    "fp32": {"FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "IMAD", "HFMA2", "HMUL2", "HADD2"},
    "int": {"ISETP", "LOP3", "SHF", "IADD3", "SEL", "FSEL", "FSETP", "FMNMX", "PRMT", "LEA", "PLOP3", "VIADD",
            "IABS", "FLO", "POPC", "F2FP", "MOV", "IMNMX", "VIMNMX", "BMSK", "SGXT", "LOP", "CS2R", "P2R", "R2P",
            "SHFL", "VOTE", "IADD"},
    "xu": {"MUFU", "F2I", "I2F", "F2F", "FRND", "I2FP", "F2IP"},
    "shared": {"LDS", "STS", "LDSM", "STSM", "ATOMS"},
    "global": {"LDG", "STG", "LDC", "LD", "ST", "RED", "ATOMG"},
    "tensor": {"HGMMA", "QGMMA"},
    "tma": {"UTMALDG", "UTMASTG", "UBLKCP"},
}
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-9T]\s+)?([A-Z0-9_]+)(\.[A-Za-z0-9_.]+)?\s*([^;]*);")
FUNCTION = re.compile(r"Function : (\S+)")
HGMMA_SHAPE = sass_schedule.HGMMA_SHAPE  # HGMMA's or QGMMA's N and K
GMMA = sass_schedule.GMMA


def pipe_of(opcode):
    for pipe, names in PIPES.items():
        if opcode in names:
            return pipe
    if opcode.startswith("U") or opcode in ("R2UR", "S2UR", "S2R"):
        return "uniform"
    return "control"  # branches, barriers, mbarrier waits, fences, warpgroup arrive


def functions(sass, predicates=False):
    """{name: [(address, opcode, full mnemonic, operands)]} from cuobjdump -sass text; with
    predicates, each ends with its guard as written ("@!P0", or "")."""
    out, name = {}, None
    for line in sass.splitlines():
        m = FUNCTION.search(line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = INSTRUCTION.match(line)
        if m and name is not None:
            opcode = m.group(3)
            row = (int(m.group(1), 16), opcode, opcode + (m.group(4) or ""), m.group(5))
            out[name].append(row + ((m.group(2) or "").strip(),) if predicates else row)
    return out


def main_loop(code):
    """The kernel's main loop: of the backward branches' bodies, the one with the most wgmmas, the
    smallest of those: (first, last) indices, or None. ptxas places spin-wait retries after the
    function's last EXIT, branching back into a loop over more than the loop (over every loop
    when a kernel runs its tiles in several, as the Hopper kernel's masked and whole tiles):
    their branches are not loops' ends."""
    index = {address: i for i, (address, *_rest) in enumerate(code)}
    exits = [i for i, row in enumerate(code) if row[1] == "EXIT"]
    end = exits[-1] if exits else len(code)
    best, best_key = None, None
    for i, (address, opcode, _full, operands, *_guard) in enumerate(code):
        if opcode != "BRA" or i > end:
            continue
        target = re.search(r"0x([0-9a-f]+)", operands)
        if not target:
            continue
        t = int(target.group(1), 16)
        if t >= address or t not in index:
            continue
        first = index[t]
        hgmmas = sum(code[j][1] in GMMA for j in range(first, i + 1))
        key = (hgmmas, -(i - first))
        if hgmmas and (best_key is None or key > best_key):
            best, best_key = (first, i), key
    return best


def estimate(code, loop, warps):
    body = code[loop[0]:loop[1] + 1]
    pipes = Counter(pipe_of(op) for _a, op, _f, _o in body)
    gmmas = [full for _a, op, full, _o in body if op in GMMA]
    macs = sum(64 * int(m.group(1)) * int(m.group(2)) for m in map(HGMMA_SHAPE.search, gmmas))
    tensor_time = sum(sass_schedule.bf16_equivalent_macs(full) for full in gmmas)
    # per tile and SM: `warps` warps run the body once each; one wgmma is a warpgroup's, so the
    # tensor work is the body's wgmmas times the warpgroups
    warpgroups = warps / 4
    cycles = {"issue": warps * len(body) / ISSUE_PER_CYCLE,
              "tensor": warpgroups * tensor_time / TENSOR_MACS_PER_CYCLE}
    for pipe, rate in THROUGHPUT.items():
        cycles[pipe] = warps * pipes.get(pipe, 0) / rate
    scalar = max(v for k, v in cycles.items() if k != "tensor")
    return body, pipes, macs * warpgroups, cycles, max(cycles.values()), cycles["tensor"] + scalar


def schedule(code, loop, warps, shape):
    """The latency-aware figures of one kernel's loop (code with guards, as functions(...,
    predicates=True) gives): cycles a tile per SM at half, the stated and twice the latencies,
    and the whole launch of `shape` = (B, H, N) at each."""
    body = code[loop[0]:loop[1] + 1]
    ops = [sass_schedule.decode(op, full, operands, guard) for _a, op, full, operands, guard in body]
    per_smsp = warps // 4  # one warp of each consumer warpgroup on each sub-partition
    steady = sass_schedule.scheduled_range(ops, per_smsp)
    alone = sass_schedule.simulate(ops, 1)  # a tile with nothing to overlap: the fill and the drain
    block_n = next((int(HGMMA_SHAPE.search(full).group(1)) for _a, op, full, operands, _g in body
                    if op in GMMA and operands.split(",")[1].strip().startswith("gdesc")), 128)
    b, h, n = shape
    tiles, blocks = math.ceil(n / block_n), b * h * math.ceil(n / BLOCK_M)
    waves = math.ceil(blocks / SMS)
    fill_drain = alone + MEMORY_ROUND_TRIP_CYCLES
    launch = {k: waves * (tiles * v + fill_drain) for k, v in steady.items()}
    return {"steady": steady, "block_n": block_n, "tiles": tiles, "blocks": blocks, "waves": waves,
            "fill_drain": fill_drain, "launch_cycles": launch}


def resource_usage(text, name):
    """REG, STACK, SHARED and LOCAL of `name` from cuobjdump -res-usage."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if name in line and i + 1 < len(lines):
            return {k: int(v) for k, v in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", lines[i + 1])}
    return {}


def default_cuobjdump():
    """cuobjdump on the PATH, else the one the triton package (a dependency of torch) bundles."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import importlib.util
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.origin:
        import pathlib
        bundled = pathlib.Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.exists():
            return str(bundled)
    return "cuobjdump"


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def add_sass_arguments(p, what):
    """The options every SASS tool here takes: a binary or --sass, --kernel, --cuobjdump."""
    p.add_argument("binary", nargs="?", help="an object, library or executable with sm_90a code")
    p.add_argument("--sass", help="cuobjdump -sass output, instead of a binary")
    p.add_argument("--kernel", default=r"hopper.*forward_kernel", help=f"regex of the kernels to {what}")
    p.add_argument("--cuobjdump", default=None, help="default: on the PATH, else triton's")


def read_sass(p, a, resources_file=None):
    """(the --kernel regex, the SASS, the -res-usage text) of add_sass_arguments' options: a bad
    option is p.error (exit 2); OSError or CalledProcessError where the SASS cannot be read. The
    resources come from `resources_file` with --sass (none without it), from cuobjdump otherwise."""
    if (a.binary is None) == (a.sass is None):
        p.error("give a binary or --sass FILE")
    try:
        kernel = re.compile(a.kernel)
    except re.error as e:
        p.error(f"--kernel: {e}")
    if a.sass:
        sass = open(a.sass, errors="replace").read()
        resources = open(resources_file, errors="replace").read() if resources_file else ""
    else:
        tool = a.cuobjdump or default_cuobjdump()
        sass = run([tool, "-sass", a.binary])
        resources = run([tool, "-res-usage", a.binary])
    return kernel, sass, resources


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    add_sass_arguments(p, "estimate")
    p.add_argument("--resources", help="cuobjdump -res-usage output, with --sass")
    p.add_argument("--warps", type=int, default=8, help="warps that run the main loop per block (default 8)")
    p.add_argument("--shape", default="1,64,4096",
                   help="B,H,N of the launch the kernel figure is for (default 1,64,4096: docs/gpu.md's benchmark)")
    p.add_argument("--json", action="store_true", help="one JSON line per kernel")
    a = p.parse_args(argv)
    if a.warps < 4 or a.warps % 4:
        p.error("--warps must be a positive multiple of 4 (whole warpgroups)")
    try:
        shape = tuple(int(x) for x in a.shape.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or not all(1 <= x <= 1 << 24 for x in shape):
        p.error(f"--shape {a.shape!r}: three integers B,H,N, each 1 to 2^24")
    try:
        kernel, sass, resources = read_sass(p, a, a.resources)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"sass_estimate: {e}", file=sys.stderr)
        return 2
    found = 0
    for name, guarded in functions(sass, predicates=True).items():
        if not kernel.search(name):
            continue
        code = [row[:4] for row in guarded]
        loop = main_loop(code)
        if loop is None:
            print(f"sass_estimate: {name}: no loop with a wgmma (HGMMA or QGMMA)", file=sys.stderr)
            continue
        found += 1
        body, pipes, macs, cycles, overlapped, serial = estimate(code, loop, a.warps)
        flops = 2 * macs
        sched = schedule(guarded, loop, a.warps, shape)
        rate = flops * SMS * CLOCK_HZ / 1e12
        launch_flops = flops * sched["tiles"] * sched["blocks"] / SMS  # per SM-equivalent, as `rate`
        line = {"kernel": name, "instructions": len(code), "loop_instructions": len(body),
                "pipes": dict(sorted(pipes.items())), "tile_macs": macs,
                "cycles_per_tile": {k: round(v, 1) for k, v in cycles.items()},
                "bound": max(cycles, key=cycles.get),
                "tflops_overlapped": round(flops * SMS * CLOCK_HZ / overlapped / 1e12, 1),
                "tflops_serial": round(flops * SMS * CLOCK_HZ / serial / 1e12, 1),
                "cycles_per_tile_scheduled": {k: round(v, 1) for k, v in sched["steady"].items()},
                "tflops_scheduled": {k: round(rate / v, 1) for k, v in sched["steady"].items()},
                "launch": {"shape": list(shape), "block_n": sched["block_n"], "blocks": sched["blocks"],
                           "waves": sched["waves"], "fill_drain_cycles": round(sched["fill_drain"]),
                           "tflops": {k: round(launch_flops / flops * rate / v, 1)
                                      for k, v in sched["launch_cycles"].items()}},
                "resources": resource_usage(resources, name)}
        if a.json:
            print(json.dumps(line))
        else:
            print(f"{name}\n  {len(code)} instructions, main loop {len(body)}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(pipes.items())))
            print("  cycles per tile: " + ", ".join(f"{k} {v:.0f}" for k, v in cycles.items())
                  + f" -> bound by {line['bound']}")
            print(f"  estimate: {line['tflops_overlapped']} TFLOP/s overlapped, {line['tflops_serial']} serial; "
                  f"resources {line['resources']}")
            t, k = line["tflops_scheduled"], line["launch"]
            kt = k["tflops"]
            print(f"  scheduled: {t['stated']} TFLOP/s a tile ({min(t.values())} to {max(t.values())} from twice to "
                  f"half the latencies); the launch {a.shape}: {kt['stated']} ({min(kt.values())} to "
                  f"{max(kt.values())}), {k['blocks']} blocks in {k['waves']} waves")
    if not found:  # nothing estimated is an answer only when the kernels were there to look at
        names = list(functions(sass))
        if not names:
            print(f"sass_estimate: {a.sass or a.binary}: no SASS function in it (cuobjdump -sass output, or a binary "
                  "with sm_90a code)", file=sys.stderr)
            return 2
        if not any(kernel.search(n) for n in names):
            print(f"sass_estimate: --kernel {a.kernel!r} matches none of its {len(names)} functions", file=sys.stderr)
            return 2
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
