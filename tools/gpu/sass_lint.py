#!/usr/bin/env python3
"""A lint of a Hopper kernel's SASS for wgmma's register hazards, which the simulated GPU cannot
see (it runs the C++ source, not what ptxas made of it): between an HGMMA's issue and the
WARPGROUP.DEPBAR that waits for its group, no other instruction may read or write its
accumulator registers or write the registers it reads A from, and every HGMMA follows a
WARPGROUP.ARRIVE (wgmma.fence) issued since the last DEPBAR.

    sass_lint.py BINARY [--kernel REGEX] [--cuobjdump PATH]
    sass_lint.py --sass FILE.sass [--kernel REGEX]

BINARY: an object, library or executable with sm_90a code (cuobjdump reads it). The code is
followed as laid out: an unconditional branch or EXIT ends what is in flight on that path (the
code after it is reached from elsewhere). A group ends at the HGMMA marked gsb0; DEPBAR.LE gsb0,
N leaves the newest N groups in flight. Exit 0 when clean, 1 with each hazard printed (kernel,
address, instruction, the HGMMA it races), 2 on bad arguments or no function to lint.
"""
import re
import sys
import subprocess
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import Parser  # noqa: E402
from sass_estimate import GMMA, HGMMA_SHAPE, add_sass_arguments, functions, read_sass  # noqa: E402

REGISTER = re.compile(r"\bR(\d+)\b")
DEPBAR = re.compile(r"gsb0,\s*0x([0-9a-f]+)")
# opcodes whose first operand is an address or a source, not a register they write
NO_DESTINATION = {"STS", "STG", "ST", "STL", "RED", "REDG", "ATOMS", "ATOMG", "ATOM", "STSM", "BRA", "BSSY", "BSYNC",
                  "SYNCS", "UTMASTG", "UTMALDG", "UBLKCP", "BAR", "MEMBAR", "EXIT", "RET", "CALL"}


def width(full):
    """Registers each named register stands for: 2 for a 64-bit operation, 4 for 128."""
    return 4 if ".128" in full else 2 if (".64" in full or ".WIDE" in full) else 1


def registers(operand, n):
    out = set()
    for m in REGISTER.finditer(operand):
        out.update(range(int(m.group(1)), int(m.group(1)) + n))
    return out


def hgmma_registers(full, operands):
    """(accumulators, A registers) of an HGMMA: D is N / 2 registers from the first operand
    (float32 accumulators, m64); A from registers is 4 from the second when it is one."""
    parts = [p.strip() for p in operands.split(",")]
    m = HGMMA_SHAPE.search(full)
    n = int(m.group(1)) if m else 256
    d = REGISTER.match(parts[0])
    acc = set(range(int(d.group(1)), int(d.group(1)) + n // 2)) if d else set()
    a = REGISTER.fullmatch(parts[1]) if len(parts) > 1 else None
    return acc, set(range(int(a.group(1)), int(a.group(1)) + 4)) if a else set()


def lint(code):
    """The hazards of one function's code [(address, opcode, full mnemonic, operands, guard)], as strings."""
    hazards, groups, arrived = [], [[]], False  # groups: closed ones oldest first, the last open
    for address, opcode, full, operands, guard in code:
        where = f"/*{address:04x}*/ {full} {operands}".rstrip()
        if full.startswith("WARPGROUP.ARRIVE"):
            arrived = True
            continue
        if full.startswith("WARPGROUP.DEPBAR"):
            m = DEPBAR.search(operands)
            keep = int(m.group(1), 16) if m else 0
            closed = groups[:-1]
            groups = closed[len(closed) - keep:] + [groups[-1]] if keep else [groups[-1]]
            arrived = False
            continue
        in_flight = [h for g in groups for h in g]
        if opcode in GMMA:
            if not arrived:
                hazards.append(f"{where}: an HGMMA with no WARPGROUP.ARRIVE since the last WARPGROUP.DEPBAR")
            acc, a = hgmma_registers(full, operands)
            for h in in_flight:  # a chain adds to its own accumulators; another's are off limits
                if acc & h["a"] or (acc & h["acc"] and acc != h["acc"]):
                    hazards.append(f"{where}: overlaps the registers of {h['where']} in flight")
                    break
            groups[-1].append({"where": where, "acc": acc, "a": a})
            if "gsb0" in operands:
                groups.append([])
            continue
        parts = [p.strip() for p in operands.split(",")] if operands.strip() else []
        n = width(full)
        touched = registers(operands, n)
        written = registers(parts[0], n) if parts and opcode not in NO_DESTINATION and "[" not in parts[0] else set()
        for h in in_flight:  # one hazard an instruction: the oldest HGMMA it races
            if touched & h["acc"]:
                hazards.append(f"{where}: touches accumulators of {h['where']} before its WARPGROUP.DEPBAR")
                break
            if written & h["a"]:
                hazards.append(f"{where}: overwrites the A registers of {h['where']} before its WARPGROUP.DEPBAR")
                break
        if opcode in ("EXIT", "BRA") and not guard:
            groups, arrived = [[]], False  # the code after it is reached from elsewhere
    return hazards


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
    add_sass_arguments(p, "lint")
    a = p.parse_args(argv)
    try:
        kernel, sass, _ = read_sass(p, a)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"sass_lint: {e}", file=sys.stderr)
        return 2
    linted = {name: code for name, code in functions(sass, predicates=True).items() if kernel.search(name)}
    if not linted:
        print(f"sass_lint: {a.sass or a.binary}: no function matches --kernel {a.kernel!r}", file=sys.stderr)
        return 2
    failed = 0
    for name, code in linted.items():
        hgmmas = sum(1 for c in code if c[1] in GMMA)
        hazards = lint(code)
        failed += bool(hazards)
        print(f"{name}: {hgmmas} wgmma (HGMMA, QGMMA), {len(hazards)} hazard(s)")
        for h in hazards:
            print(f"  {h}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
