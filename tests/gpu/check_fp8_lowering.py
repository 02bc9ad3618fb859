"""Canary: the golden vectors describe what ptxas emits for FP8 mma.sync on sm_90, so the build
must still emit it. On sm_90, PTX mma.sync.m16n8k32 with E4M3/E5M2 inputs is not one instruction:
ptxas unpacks each register into FP16 pairs (F2FP ... UNPACK_B, 12 of them), issues two
HMMA.16816.F32 (the first from zero on bytes {0,1} of each 4-byte group, the second on bytes
{2,3} accumulating the first), and adds C with four FADDs, which is the model the H100 golden
vectors revealed (docs/mma-fp8-sm90.md). This test disassembles the probe kernel of the built
library and fails if that lowering changes (a native QMMA, a different count, C entering the
HMMAs), since the model would then no longer describe the compiled code.

Usage: check_fp8_lowering.py LIBROUNDSCOPE_GPU.a   (cuobjdump and nvdisasm on PATH or in the
nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm Python packages, which tools/setup.sh installs)"""
import glob
import os
import re
import shutil
import subprocess
import sys

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_harness import check, finish  # noqa: E402

LIBRARY = sys.argv[1]
KERNELS = {"E4M3": "_ZN10roundscope3gpu15mma_sync_kernelILNS0_5InputE2EEEvPKjS4_S4_Pji",
           "E5M2": "_ZN10roundscope3gpu15mma_sync_kernelILNS0_5InputE3EEEvPKjS4_S4_Pji"}


def tool_dir():
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return None
    for d in glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "cu*", "bin")):
        if os.path.exists(os.path.join(d, "cuobjdump")) and os.path.exists(os.path.join(d, "nvdisasm")):
            return d
    sys.exit("check_fp8_lowering.py: cuobjdump and nvdisasm not found (tools/setup.sh installs them)")


extra = tool_dir()
env = dict(os.environ, PATH=(extra + os.pathsep if extra else "") + os.environ.get("PATH", ""))
sass = subprocess.run(["cuobjdump", "-sass", "-arch", "sm_90a", LIBRARY], capture_output=True, text=True, env=env)
check("cuobjdump runs", sass.returncode == 0, sass.stderr[-400:])


def function(name):
    """The instructions of one kernel, without addresses and encodings."""
    out, inside = [], False
    for line in sass.stdout.splitlines():
        if "Function : " in line:
            inside = line.split("Function : ")[1].strip() == name
        elif inside:
            m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
            if m:
                out.append(m.group(1))
    return out


for fmt, name in KERNELS.items():
    code = function(name)
    check(f"{fmt}: the probe kernel is in the library", len(code) > 0, name)
    unpacks = [i for i in code if i.startswith(f"F2FP.F16.{fmt}.UNPACK_B")]
    hmma = [i for i in code if i.startswith("HMMA.16816.F32 ")]
    fadds = [i for i in code if i.startswith("FADD ")]
    native = [i for i in code if "QMMA" in i or "HMMA.16832" in i or "OMMA" in i]
    print(f"{fmt}: {len(unpacks)} x F2FP.F16.{fmt}.UNPACK_B, " + "; ".join(hmma) + f"; {len(fadds)} x FADD")
    check(f"{fmt}: no native FP8 MMA", not native, native)
    check(f"{fmt}: 12 unpacks of FP8 pairs into FP16", len(unpacks) == 12, len(unpacks))
    check(f"{fmt}: two HMMA.16816.F32", len(hmma) == 2, hmma)
    if len(hmma) == 2:
        first, second = (re.split(r",\s*", h.split(" ", 1)[1]) for h in hmma)
        check(f"{fmt}: the first HMMA starts from zero", first[3] == "RZ", hmma[0])
        check(f"{fmt}: the second accumulates the first", second[3] == first[0], hmma)
    check(f"{fmt}: C added by four FADDs", len(fadds) == 4, fadds)
finish("check_fp8_lowering.py")
