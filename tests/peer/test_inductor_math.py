"""Property: torch.compile's exp and log on a CPU (Inductor's vectorized code, which calls
SLEEF's Sleef_expf16_u10 and Sleef_logf16_u10 with AVX-512, Sleef_expf8_u10 and Sleef_logf8_u10
with AVX2, from libtorch_cpu) give, for every one of the 2^32 float32 bit patterns, the bits of
roundscope's models of them (emu/attention/math/inductor_cpu_math.hpp), NaN payloads included.
The fast test takes every 4099th pattern and the boundaries; the exhaustive one every pattern
(ROUNDSCOPE_CHUNKS: K of the 256 chunks of 2^24) at the widest vectors this CPU has, and where
it has AVX-512 also holds AVX2's code to the AVX-512 bits, which it gives but for log's NaNs
(AVX2's is always 0x7FC00000: the model's logf_avx2), on every pattern (cheaper than the model).

The library under test is roundscope's C entry point (ROUNDSCOPE_CAPI, set by ctest). On a CPU
with neither vector set Inductor runs scalar code, and the test says so and skips."""
import ctypes
import os

import numpy as np
import pytest
import torch
from capi import capi_path
from cpu_vectors import compiled_at, this_cpu_runs

CHUNK = 1 << 24
FUNCTIONS = {"exp": 0, "log": 1}
AVX2_LOG = 2  # the C entry's function for log as AVX2's code computes it


@pytest.fixture(scope="module")
def lib():
    path = capi_path()
    if not this_cpu_runs():
        pytest.skip("the models are of Inductor's AVX-512 and AVX2 code; this CPU runs "
                    f"{torch.backends.cpu.get_cpu_capability()}")
    lib = ctypes.CDLL(path)
    lib.roundscope_inductor_math.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    lib.roundscope_inductor_math.restype = ctypes.c_int
    return lib


def compiled_functions(vector):
    """The compiled functions at one vector width, for a fixed length (one compilation each)."""
    out = {}
    for name in FUNCTIONS:
        f = compiled_at(getattr(torch, name), vector)
        f(torch.zeros(CHUNK))  # compiled now, before another width's reset
        out[name] = f
    return out


@pytest.fixture(scope="module")
def compiled(lib):
    """At the widest vectors this CPU runs."""
    return compiled_functions(this_cpu_runs()[0])


def differing_at(lib, name, vector, x):
    """How many of the float32 x the compiled function at `vector` and the model part on."""
    theirs = compiled_functions(vector)[name](torch.from_numpy(x)).numpy()
    return int((theirs.view(np.uint32) != ours(lib, name, x, vector).view(np.uint32)).sum())


def ours(lib, name, x, vector="avx512"):
    out = np.empty_like(x)
    function = AVX2_LOG if (name, vector) == ("log", "avx2") else FUNCTIONS[name]
    assert lib.roundscope_inductor_math(function, x.ctypes.data, x.size, out.ctypes.data) == 0
    return out


def differing(lib, compiled, name, bits):
    """The bit patterns (uint32) whose compiled result and model differ, padded to CHUNK."""
    x = bits if bits.size == CHUNK else np.concatenate([bits, np.zeros(CHUNK - bits.size, dtype=np.uint32)])
    x = x.view(np.float32)
    theirs = compiled[name](torch.from_numpy(x)).numpy()
    bad = theirs.view(np.uint32) != ours(lib, name, x, this_cpu_runs()[0]).view(np.uint32)
    return x.view(np.uint32)[bad]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_sample_and_the_boundaries(lib, compiled, name):
    edges = [0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
             0xFFC00001, 0x42D00000, 0xC2D00000, 0x42C80000, 0xC2C80001, 0x3F800000, 0x3F400000, 0x3FC00000]
    sample = np.concatenate([np.array(edges, dtype=np.uint32),
                             np.arange(0, 1 << 32, 4099, dtype=np.uint64)[:CHUNK - len(edges)].astype(np.uint32)])
    bad = differing(lib, compiled, name, sample)
    assert bad.size == 0, f"{name}: {bad.size} differ, e.g. {[hex(int(b)) for b in bad[:5]]}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_avx2_code_on_a_sample_with_nans_and_negatives(lib, name):
    """AVX2's log returns the default NaN where AVX-512's keeps the sign and fraction."""
    if "avx2" not in this_cpu_runs():
        pytest.skip(f"this CPU runs {torch.backends.cpu.get_cpu_capability()}")
    x = np.arange(0, 1 << 32, 257, dtype=np.uint64)[:CHUNK].astype(np.uint32).view(np.float32)
    assert differing_at(lib, name, "avx2", x) == 0
    if name == "log":
        assert (ours(lib, "log", x, "avx2").view(np.uint32) != ours(lib, "log", x).view(np.uint32)).sum() > 1000


def test_a_wrong_model_fails(lib):
    """The negative control: the models are not the correctly rounded functions, and the
    comparison sees the difference (SLEEF's exp is within 1 ulp, not correctly rounded)."""
    x = np.linspace(-80, 80, CHUNK, dtype=np.float32)
    exact = np.exp(x.astype(np.float64)).astype(np.float32)
    assert (ours(lib, "exp", x).view(np.uint32) != exact.view(np.uint32)).sum() > 1000


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_float32(lib, compiled, name):
    """The widest code against the model on every input; where this CPU runs AVX-512 and AVX2,
    the same loop holds AVX2's code to the AVX-512 bits it has just computed (its exp is
    AVX-512's, its log AVX-512's but for the NaNs, the default NaN), which holds the AVX2 model
    too, at the cost of one more compiled call per chunk rather than a loop of its own."""
    narrow = compiled_functions("avx2")[name] if this_cpu_runs() == ("avx512", "avx2") else None
    chunks = int(os.environ.get("ROUNDSCOPE_CHUNKS", (1 << 32) // CHUNK))
    bad, bad_narrow, offsets = 0, 0, np.arange(CHUNK, dtype=np.uint32)
    for c in np.linspace(0, (1 << 32) // CHUNK - 1, chunks).astype(np.int64):
        x = (offsets + np.uint32(int(c) * CHUNK)).view(np.float32)
        theirs = compiled[name](torch.from_numpy(x))
        bad += int((theirs.numpy().view(np.uint32) != ours(lib, name, x, this_cpu_runs()[0]).view(np.uint32)).sum())
        if narrow is not None:
            if name == "log":
                theirs = torch.where(torch.isnan(theirs), torch.tensor(float("nan")), theirs)
            bad_narrow += int((theirs.view(torch.int32) != narrow(torch.from_numpy(x)).view(torch.int32)).sum())
    assert bad == 0, f"{name}: {bad} of {chunks * CHUNK} differ"
    assert bad_narrow == 0, \
        f"{name}: {bad_narrow} of {chunks * CHUNK} differ between AVX-512 (NaNs made default) and AVX2"
