"""What the SASS tools' tests share: a cuobjdump listing written from instruction texts, and the
Hopper kernel compiled for sm_90a with the project's numerics flags (where nvcc is)."""
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if pathlib.Path("/usr/local/cuda/bin/nvcc").exists()
                                else None)


def listing(lines):
    """cuobjdump -sass text of one function, _Z6kernel, holding `lines` at 16-byte addresses."""
    out = ["\t\tFunction : _Z6kernel"]
    for i, text in enumerate(lines):
        out.append(f"        /*{16 * i:04x}*/                   {text} ;   /* 0x0 */")
    return "\n".join(out) + "\n"


def compile_hopper_kernel(obj):
    """gpu/kernels/hopper_flash.cu compiled to `obj` for sm_90a as gpu/CMakeLists.txt compiles it:
    the finished nvcc process (its stderr holds ptxas' warnings)."""
    return subprocess.run([NVCC, "-std=c++20", "-DNDEBUG", f"-I{ROOT}", "--expt-relaxed-constexpr", "--fmad=false",
                           "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-gencode",
                           "arch=compute_90a,code=sm_90a", "-c", str(ROOT / "gpu" / "kernels" / "hopper_flash.cu"),
                           "-o", str(obj)], capture_output=True, text=True)
