"""Canary: the golden vectors describe what ptxas emits for FP8 mma.sync on sm_90, so the build
must still emit it. On sm_90, PTX mma.sync.m16n8k32 with E4M3/E5M2 inputs is not one instruction:
ptxas unpacks each register into FP16 pairs (F2FP ... UNPACK_B, 12 of them), issues two
HMMA.16816.F32 (the first from zero on bytes {0,1} of each 4-byte group, the second on bytes
{2,3} accumulating the first), and adds C with four FADDs, which is the model the H100 golden
vectors revealed (docs/mma-fp8-sm90.md). This test disassembles the probe kernel of the built
library and fails if that lowering changes (a native QMMA, a different count, C entering the
HMMAs), since the model would then no longer describe the compiled code.

The library is ROUNDSCOPE_GPU_LIBRARY (set by ctest); cuobjdump and nvdisasm come from PATH or
from the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm Python packages, which tools/setup.sh
installs."""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

KERNELS = {"E4M3": "_ZN10roundscope3gpu15mma_sync_kernelILNS0_5InputE2EEEvPKjS4_S4_Pji",
           "E5M2": "_ZN10roundscope3gpu15mma_sync_kernelILNS0_5InputE3EEEvPKjS4_S4_Pji"}


def tool_dir():
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return None
    for d in glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia", "cu*", "bin")):
        if os.path.exists(os.path.join(d, "cuobjdump")) and os.path.exists(os.path.join(d, "nvdisasm")):
            return d
    pytest.fail("cuobjdump and nvdisasm not found (tools/setup.sh installs them)")


@pytest.fixture(scope="module")
def sass():
    library = os.environ.get("ROUNDSCOPE_GPU_LIBRARY")
    if not library:
        pytest.fail("ROUNDSCOPE_GPU_LIBRARY names no library (ctest sets it)")
    extra = tool_dir()
    env = dict(os.environ, PATH=(extra + os.pathsep if extra else "") + os.environ.get("PATH", ""))
    p = subprocess.run(["cuobjdump", "-sass", "-arch", "sm_90a", library], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-400:]
    return p.stdout


def function(sass, name):
    """The instructions of one kernel, without addresses and encodings."""
    out, inside = [], False
    for line in sass.splitlines():
        if "Function : " in line:
            inside = line.split("Function : ")[1].strip() == name
        elif inside:
            m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
            if m:
                out.append(m.group(1))
    return out


@pytest.mark.parametrize("fmt", list(KERNELS))
def test_fp8_mma_sync_lowers_to_two_hmma_on_unpacked_pairs(sass, fmt):
    code = function(sass, KERNELS[fmt])
    assert code, f"the probe kernel {KERNELS[fmt]} is in the library"
    unpacks = [i for i in code if i.startswith(f"F2FP.F16.{fmt}.UNPACK_B")]
    hmma = [i for i in code if i.startswith("HMMA.16816.F32 ")]
    fadds = [i for i in code if i.startswith("FADD ")]
    native = [i for i in code if "QMMA" in i or "HMMA.16832" in i or "OMMA" in i]
    assert not native, f"a native FP8 MMA: {native}"
    assert len(unpacks) == 12, f"{len(unpacks)} unpacks of FP8 pairs into FP16, not 12"
    assert len(hmma) == 2, hmma
    first, second = (re.split(r",\s*", h.split(" ", 1)[1]) for h in hmma)
    assert first[3] == "RZ", f"the first HMMA starts from zero: {hmma[0]}"
    assert second[3] == first[0], f"the second accumulates the first: {hmma}"
    assert len(fadds) == 4, f"C added by four FADDs: {fadds}"
