#!/usr/bin/env python3
"""Reads the sm_90 machine code of the flash-attention forward kernel that the installed PyTorch
ships, and checks the op order the torch-flash-sm90 recipe models (docs/gpu.md):

  products    HMMA.16816.F32.BF16 only (mma.sync m16n8k16, BF16 in, float32 accumulate)
  exp2        every MUFU.EX2 behind the non-ftz guard (FSETP.GEU x, -126; @!P FMUL x, 0.5; ...;
              @!P FMUL r, r, r), its argument made by FADD/FMUL, never an FFMA (UNFUSE_FMA)
  row max     quad reduction by SHFL.BFLY 2, then 1
  1/l         MUFU.RCP (with Newton steps: the correctly rounded reciprocal)
  LSE         MUFU.LG2 behind the x 2^24 / -24 guard, FMUL by ln 2 (0.693147182464599609), FFMA
  casts       F2FP.BF16.F32.PACK_AB (round to nearest even)

The kernel: pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>> in BF16,
not causal, even M, N and K. cuobjdump and nvdisasm come from PATH or from the
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm Python packages.

    torch_flash_sass.py [--library libtorch_cuda.so] [--out FILE.json] [--sass FILE.sass]
Exit 0 when the pattern holds, 1 when it changed (what changed is printed), 77 when there is
nothing to read (a CPU-only torch, no cuobjdump), 2 on bad arguments.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

KERNEL = ("_ZN13pytorch_flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0E"
          "N7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EELb0ELb0ELb0ELb0ELb1ELb1ELb0ELb0EEEv"
          "NS_16Flash_fwd_paramsE")
SKIP = 77


def tool(name):
    if shutil.which(name):
        return shutil.which(name)
    for site in sys.path:
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_cuobjdump/bin", "nvidia/cuda_nvdisasm/bin"):
            p = pathlib.Path(site, sub, name)
            if p.exists():
                return str(p)
    return None


def torch_library():
    try:
        import torch
    except ImportError:
        return None
    p = pathlib.Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
    return p if p.exists() else None


def kernel_sass(library, cuobjdump, nvdisasm):
    """The kernel's SASS lines, from the one sm_90 cubin of `library` that holds it."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cuobjdump, "-xelf", "all", "-arch", "sm_90", str(library)], cwd=tmp, check=True,
                       capture_output=True)
        needle = KERNEL.encode()
        cubins = [p for p in sorted(pathlib.Path(tmp).glob("*.cubin")) if needle in p.read_bytes()]
        if not cubins:
            return None
        text = subprocess.run([nvdisasm, "-c", str(cubins[0])], check=True, capture_output=True, text=True).stdout
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith(".text."):
            inside = line.startswith(f".text.{KERNEL}:")
            continue
        if inside and re.search(r"/\*[0-9a-f]+\*/", line):
            lines.append(re.sub(r"\s+", " ", line.split("*/", 1)[1]).strip(" ;"))
    return lines


def writes(instr):
    """The register an instruction writes (its first operand), or None."""
    m = re.match(r"(?:@!?U?P\w+ )?[A-Z0-9.]+ (R\d+)", instr)
    return m.group(1) if m else None


def reads(instr):
    return re.findall(r"\bR\d+\b", instr.split(" ", 2)[-1])[1:] if writes(instr) else []


def analyse(sass):
    ops = [re.sub(r"^@!?U?P\w+ ", "", s).split(" ")[0] for s in sass]
    count = lambda prefix: sum(o.startswith(prefix) for o in ops)  # noqa: E731
    facts = {"instructions": len(sass), "hmma": {}, "mufu_ex2": count("MUFU.EX2"), "mufu_lg2": count("MUFU.LG2"),
             "mufu_rcp": count("MUFU.RCP"), "ffma": count("FFMA"), "f2fp_bf16": count("F2FP.BF16.F32.PACK_AB")}
    for o in ops:
        if o.startswith("HMMA"):
            facts["hmma"][o] = facts["hmma"].get(o, 0) + 1
    # What produced each MUFU.EX2's operand: the nearest earlier write of that register.
    producers = {}
    for i, s in enumerate(sass):
        if not ops[i].startswith("MUFU.EX2"):
            continue
        src = re.findall(r"\bR\d+\b", s)[-1]
        for j in range(i - 1, max(-1, i - 60), -1):
            if writes(sass[j]) == src and not sass[j].startswith("@"):  # past the guard's in-place halving
                producers[ops[j]] = producers.get(ops[j], 0) + 1
                break
    facts["ex2_argument_producers"] = producers
    facts["ex2_guards"] = sum(bool(re.search(r"FSETP\.GEU\.AND P\d, PT, R\d+(\.reuse)?, -126, PT", s)) for s in sass)
    facts["ex2_halvings"] = sum(bool(re.search(r"@!P\d FMUL (R\d+), \1, 0\.5$", s)) for s in sass)
    facts["ex2_squarings"] = sum(bool(re.search(r"@!P\d FMUL (R\d+), \1, \1$", s)) for s in sass)
    facts["lg2_guard"] = sum(bool(re.search(r"@!P\d FMUL R\d+, R\d+, 16777216$", s)) for s in sass)
    facts["lg2_ln2"] = sum(bool(re.search(r"FMUL R\d+, R\d+, 0\.69314718246459960938$", s)) for s in sass)
    shuffles = [re.search(r"SHFL\.BFLY PT, R\d+, R\d+, (0x\d+)", s).group(1) for s in sass if "SHFL.BFLY" in s]
    facts["shuffle_offsets"] = shuffles
    return facts


def verdict(f):
    """What differs from the modelled pattern (empty: nothing)."""
    bad = []
    if list(f["hmma"]) != ["HMMA.16816.F32.BF16"]:
        bad.append(f"products: {f['hmma']} (expected HMMA.16816.F32.BF16 only)")
    if f["mufu_ex2"] == 0 or f["ex2_guards"] < f["mufu_ex2"] or f["ex2_halvings"] < f["mufu_ex2"] or \
            f["ex2_squarings"] < f["mufu_ex2"]:
        bad.append(f"exp2: {f['mufu_ex2']} MUFU.EX2, {f['ex2_guards']} guards, {f['ex2_halvings']} halvings, "
                   f"{f['ex2_squarings']} squarings (expected the non-ftz guard on each)")
    if "FFMA" in f["ex2_argument_producers"] or set(f["ex2_argument_producers"]) - {"FADD", "FMUL"}:
        bad.append(f"exp2 argument made by {f['ex2_argument_producers']} (expected FADD/FMUL only: UNFUSE_FMA)")
    if f["mufu_rcp"] == 0:
        bad.append("no MUFU.RCP: 1/l is not the reciprocal path")
    if f["mufu_lg2"] == 0 or f["lg2_guard"] < f["mufu_lg2"] or f["lg2_ln2"] < f["mufu_lg2"]:
        bad.append(f"LSE: {f['mufu_lg2']} MUFU.LG2, {f['lg2_guard']} 2^24 guards, {f['lg2_ln2']} FMUL by ln 2")
    pairs = [f["shuffle_offsets"][i:i + 2] for i in range(0, len(f["shuffle_offsets"]) - 1)]
    if not f["shuffle_offsets"] or set(f["shuffle_offsets"]) != {"0x2", "0x1"} or ["0x2", "0x1"] not in pairs:
        bad.append(f"quad reduction: shuffle offsets {f['shuffle_offsets'][:8]} (expected 2 then 1)")
    if f["f2fp_bf16"] == 0:
        bad.append("no F2FP.BF16.F32.PACK_AB: the BF16 casts changed")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--library", help="libtorch_cuda.so (default: the installed torch's)")
    p.add_argument("--out", help="write the facts and the verdict here (JSON)")
    p.add_argument("--sass", help="write the kernel's SASS here")
    a = p.parse_args(argv)
    library = pathlib.Path(a.library) if a.library else torch_library()
    if library is None or not library.exists():
        print("torch_flash_sass: no libtorch_cuda.so (a CPU-only torch?): nothing to read")
        return SKIP
    cuobjdump, nvdisasm = tool("cuobjdump"), tool("nvdisasm")
    if not cuobjdump or not nvdisasm:
        print("torch_flash_sass: cuobjdump or nvdisasm not found (tools/setup.sh installs them)")
        return SKIP
    sass = kernel_sass(library, cuobjdump, nvdisasm)
    if not sass:
        print(f"torch_flash_sass: {library} has no sm_90 {KERNEL[:60]}...: the kernel changed or moved")
        return 1
    facts = analyse(sass)
    bad = verdict(facts)
    if a.sass:
        pathlib.Path(a.sass).write_text("\n".join(sass) + "\n")
    if a.out:
        pathlib.Path(a.out).write_text(json.dumps({"library": str(library), "kernel": KERNEL, "facts": facts,
                                                   "changed": bad}, indent=1) + "\n")
    print(f"torch_flash_sass: {len(sass)} instructions; " + ("the pattern holds" if not bad else "CHANGED:"))
    for line in bad:
        print("  " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
