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
not causal, even M, N and K. And the split-KV combine kernel
(flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>, 4, 3, true>, BF16: 8
splits of D = 128) that emu/attention/flash/flash_split_kv.hpp models:

  expf        libdevice's: FFMA.SAT by 0x3bbb989d (log2e / 252) + 0.5, FFMA.RM by 252 into
              12582913, FADD -12583039, FFMA by 1.4426950216293334961 and 1.925963033500011079e-08,
              MUFU.EX2, FMUL
  logf        libdevice's: the 2/3 reduction (0x3f2aaaab), the degree-8 polynomial from 0x3e055027,
              FFMA by 0.69314718246459960938
  reductions  FMNMX and FADD over shuffles with offsets 4, 2, 1 (8 lanes)
  O           an FFMA chain, then F2FP.BF16.F32.PACK_AB cuobjdump and nvdisasm come from PATH or from the
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm Python packages.

    torch_flash_sass.py [--library libtorch_cuda.so] [--out FILE.json] [--sass FILE.sass]
Exit 0 when the pattern holds, 1 when it changed (what changed is printed), 77 when there is
nothing to read (a CPU-only torch, no cuobjdump), 2 on bad arguments.
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kit_files import Parser  # noqa: E402

KERNEL = ("_ZN13pytorch_flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0E"
          "N7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EELb0ELb0ELb0ELb0ELb1ELb1ELb0ELb0EEEv"
          "NS_16Flash_fwd_paramsE")
COMBINE = ("_ZN13pytorch_flash32flash_fwd_splitkv_combine_kernelI23Flash_fwd_kernel_traits"
           "ILi128ELi64ELi128ELi4ELb0ELb0EN7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi64ELi128ELi4ES3_EE"
           "Li4ELi3ELb1EEEvNS_16Flash_fwd_paramsE")
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


def kernel_sass(library, cuobjdump, nvdisasm, kernel=KERNEL):
    """The kernel's SASS lines, from the first sm_90 cubin of `library` that holds it."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cuobjdump, "-xelf", "all", "-arch", "sm_90", str(library)], cwd=tmp, check=True,
                       capture_output=True)
        needle = kernel.encode()
        cubins = [p for p in sorted(pathlib.Path(tmp).glob("*.cubin")) if needle in p.read_bytes()]
        if not cubins:
            return None
        text = subprocess.run([nvdisasm, "-c", str(cubins[0])], check=True, capture_output=True, text=True).stdout
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith(".text."):
            inside = line.startswith(f".text.{kernel}:")
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


COMBINE_CONSTANTS = {
    "expf": ["0x3bbb989d", "0x437c0000", "12582913", "-12583039", "1.4426950216293334961", "1.925963033500011079e-08"],
    "logf": ["0x3f2aaaab", "0x3e055027", "0.14084610342979431152", "-0.12148627638816833496",
             "0.13980610668659210205", "-0.16684235632419586182", "0.20012299716472625732",
             "-0.24999669194221496582", "0.33333182334899902344", "0.69314718246459960938"],
}


def analyse_combine(sass):
    text = "\n".join(sass)
    facts = {"instructions": len(sass),
             "missing_constants": {k: [c for c in cs if c not in text] for k, cs in COMBINE_CONSTANTS.items()},
             "ffma_sat": sum(s.startswith("FFMA.SAT") for s in sass),
             "ffma_rm": sum(s.startswith("FFMA.RM") for s in sass),
             "mufu_ex2": sum("MUFU.EX2" in s for s in sass), "mufu_lg2": sum("MUFU.LG2" in s for s in sass),
             "f2fp_bf16": sum("F2FP.BF16.F32.PACK_AB" in s for s in sass)}
    shuffles = [(re.search(r"SHFL\.BFLY PT, R\d+, R\d+, (0x\d+)", s).group(1)) for s in sass if "SHFL.BFLY" in s]
    facts["shuffle_offsets"] = shuffles
    return facts


def verdict_combine(f):
    bad = []
    for name, missing in f["missing_constants"].items():
        if missing:
            bad.append(f"combine {name}: constants {missing} not found (libdevice's {name} changed)")
    if f["ffma_sat"] < 2 or f["ffma_rm"] < 2 or f["mufu_ex2"] < 2:
        bad.append(f"combine expf: {f['ffma_sat']} FFMA.SAT, {f['ffma_rm']} FFMA.RM, {f['mufu_ex2']} MUFU.EX2 "
                   "(expected the sum's and the scales' expf)")
    if f["mufu_lg2"]:
        bad.append(f"combine logf: {f['mufu_lg2']} MUFU.LG2 (expected the software logf, no MUFU)")
    if f["shuffle_offsets"][:6] != ["0x4", "0x2", "0x1", "0x4", "0x2", "0x1"]:
        bad.append(f"combine reductions: shuffle offsets {f['shuffle_offsets'][:8]} (expected 4, 2, 1 twice)")
    if f["f2fp_bf16"] == 0:
        bad.append("combine: no F2FP.BF16.F32.PACK_AB")
    return bad


def main(argv=None):
    p = Parser(description=__doc__.splitlines()[0])
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
    combine = kernel_sass(library, cuobjdump, nvdisasm, COMBINE)
    if not combine:
        bad.append(f"no sm_90 {COMBINE[:60]}...: the split-KV combine kernel changed or moved")
    else:
        facts["combine"] = analyse_combine(combine)
        bad += verdict_combine(facts["combine"])
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
