"""The vector widths this CPU runs Inductor's code at (recipe key cpu_vector), and torch.compile
at one of them: a CPU with AVX-512 runs both (Inductor's cpp.simdlen picks AVX2's 256 bits),
one with AVX2 only the narrower. The compiled recipe's peer tests take each width this CPU has
and skip, saying why, the one it lacks."""
import pytest
import torch
import torch._inductor.config as inductor_config

SIMDLEN = {"avx512": 512, "avx2": 256}
WIDTHS = {"AVX512": ("avx512", "avx2"), "AVX2": ("avx2",)}


def this_cpu_runs():
    return WIDTHS.get(torch.backends.cpu.get_cpu_capability(), ())


def need(vector):
    if vector not in this_cpu_runs():
        pytest.skip(f"Inductor's {vector} code needs a CPU with it; this one runs "
                    f"{torch.backends.cpu.get_cpu_capability()}")


def compiled_at(fn, vector):
    """fn under torch.compile (static shapes), generating code for `vector`'s registers. Dynamo
    keeps compiled code by code object and does not guard on Inductor's settings, so each call
    compiles a trampoline of its own code object: two widths of one function never share code."""
    namespace = {}
    exec("def trampoline(*args):\n    return fn(*args)\n", {"fn": fn}, namespace)
    compiled = torch.compile(namespace["trampoline"], dynamic=False)

    def call(*args):
        with inductor_config.patch({"cpp.simdlen": SIMDLEN[vector]}):
            return compiled(*args)
    return call
