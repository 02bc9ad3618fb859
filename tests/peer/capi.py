"""Where roundscope's C entry point for the peer tests is (tests/peer/roundscope_capi.cpp): ctest
names it in ROUNDSCOPE_CAPI; a run without it fails rather than skips."""
import ctypes
import os

import numpy as np
import pytest


def capi_path() -> str:
    path = os.environ.get("ROUNDSCOPE_CAPI")
    if not path:
        pytest.fail("ROUNDSCOPE_CAPI names no library (ctest sets it)")
    return path


def mufu_units() -> dict:
    """The H100's MUFU ex2, lg2 and rcp (.approx.ftz) as float32 array functions: the hardware's own
    functions on all 2^32 inputs (test_emu_mufu_exhaustive), which a peer takes as given."""
    lib = ctypes.CDLL(capi_path())
    lib.roundscope_h100_mufu.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]

    def unit(function):
        def apply(x):
            x = np.ascontiguousarray(x, dtype=np.float32)
            out = np.empty_like(x)
            assert lib.roundscope_h100_mufu(function, x.ctypes.data, x.size, out.ctypes.data) == 0
            return out
        return apply

    return {"ex2": unit(0), "lg2": unit(1), "rcp": unit(2)}
