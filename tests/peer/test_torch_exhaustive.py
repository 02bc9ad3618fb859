"""Property: roundscope's `torch` convention gives the bits of the installed PyTorch's
Tensor.to on the CPU on all 2^32 float32 inputs, for every float format torch has and casts
to: bfloat16, float16, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz and
float8_e8m0fnu (checked against torch 2.15; float4_e2m1fn_x2 packs two values a byte and has
no cast from float32). Where torch itself does not round correctly roundscope keeps the correct
result, and the test requires those inputs to be exactly the ones named.

The library under test is roundscope's C entry point (ROUNDSCOPE_CAPI, set by ctest);
ROUNDSCOPE_CHUNKS takes K of the 4096 chunks of 2^20 inputs (default all).
"""
import os

import numpy as np
import pytest
import torch

from test_ml_dtypes_exhaustive import CHUNK, CHUNKS, load, ours
from capi import capi_path

pytestmark = pytest.mark.exhaustive

# The version roundscope's torch convention was measured against (emu/numbers/cast_options.cpp).
CHECKED = "2.15"

CASES = [  # torch dtype, roundscope format, bytes
    ("bfloat16", "bf16", 2),
    ("float16", "f16", 2),
    ("float8_e4m3fn", "e4m3", 1),
    ("float8_e5m2", "e5m2", 1),
    ("float8_e4m3fnuz", "e4m3fnuz", 1),
    ("float8_e5m2fnuz", "e5m2fnuz", 1),
    ("float8_e8m0fnu", "e8m0", 1),
]


def theirs(x, dtype, width):
    t = torch.from_numpy(x).to(dtype)
    return t.view(torch.uint8 if width == 1 else torch.int16).numpy().view(np.uint8 if width == 1 else np.uint16)


def known_torch_deviations(name, x):
    """float8_e8m0fnu: torch (as ml_dtypes) rounds the float32 subnormals in (2^-127,
    1.5 * 2^-127) up to 2^-126 (0x01), although they lie below the midpoint of 2^-127 and
    2^-126; roundscope gives 2^-127 (0x00). torch takes the magnitude, so both signs."""
    if name != "float8_e8m0fnu":
        return None
    a = x.view(np.uint32) & 0x7FFFFFFF
    return (a > 0x00400000) & (a < 0x00600000)


@pytest.fixture(scope="module")
def lib():
    return load(capi_path())


def test_the_torch_checked_is_the_torch_installed():
    assert torch.__version__.startswith(CHECKED + "."), (
        f"the torch convention was checked against torch {CHECKED}, this is {torch.__version__}: "
        "run this test, then update CHECKED, cast_options.cpp and docs/python.md")


def test_every_float32_casts_as_torch_casts_it(lib):
    # One pass over the inputs for every type (each chunk made once), torch on one thread: ctest
    # runs another test on the other core.
    torch.set_num_threads(1)
    step = max(1, CHUNKS // int(os.environ.get("ROUNDSCOPE_CHUNKS", CHUNKS)))
    bad, examples = {name: 0 for name, _, _ in CASES}, []
    for c in range(0, CHUNKS, step):
        bits = np.arange(c * CHUNK, (c + 1) * CHUNK, dtype=np.uint32)
        x = bits.view(np.float32)
        for name, fmt, width in CASES:
            want = theirs(x, getattr(torch, name), width)
            got = ours(lib, x, fmt, "torch", -1, width)
            differs = want != got
            deviation = known_torch_deviations(name, x)
            if deviation is not None and deviation.any():
                bad[name] += int(np.count_nonzero((want[deviation] != 0x01) | (got[deviation] != 0x00)))
                differs &= ~deviation
            mismatch = np.flatnonzero(differs)
            bad[name] += mismatch.size
            examples += [f"{name} x=0x{int(bits[i]):08x}: torch 0x{int(want[i]):x} roundscope 0x{int(got[i]):x}"
                         for i in mismatch[:3]][: 6 - len(examples)]
    assert not any(bad.values()), f"mismatches under the torch convention: {bad}; {examples}"
