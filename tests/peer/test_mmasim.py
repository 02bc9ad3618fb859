"""roundscope's tensor-core models beside MMA-Sim (Xie et al., arXiv:2511.10909; the `mmasim`
package), a second, independent implementation: on random tiles of every instruction both
cover, the output bits must be identical.

The library under test is roundscope's C entry point (ROUNDSCOPE_CAPI, set by ctest);
ROUNDSCOPE_MMASIM_TILES random tiles per instruction (default 100000).

Inputs per tile, in equal shares: raw random bit patterns (NaN, Inf and subnormals included);
random finite bit patterns (exponents over the whole format range); Gaussian values with a
per-row scale of 2^-8..2^8 (cancellation and close exponents). C likewise, in the accumulator.
Instructions MMA-Sim does not model: sm90 mma.sync FP8 (roundscope's model comes from the H100
golden vectors, tests/emu/mma/test_mma_golden.cpp).
"""
import ctypes
import os

import numpy as np
import pytest
import torch
from capi import capi_path

torch.set_num_threads(2)
import mmasim.nv_ptx as nv  # noqa: E402  (after the thread setting)

# (MMA-Sim class, architecture, shape and type) -> (arch, instruction, A, B, accumulator)
CASES = [
    ("MMA", "Ampere", "m16n8k16.f32.bf16.bf16.f32", "sm80", "mma.sync", "bf16", "bf16", "f32"),
    ("MMA", "Ampere", "m16n8k16.f32.f16.f16.f32", "sm80", "mma.sync", "f16", "f16", "f32"),
    ("MMA", "Ampere", "m16n8k16.f16.f16.f16.f16", "sm80", "mma.sync", "f16", "f16", "f16"),
    ("MMA", "Ampere", "m16n8k8.f32.tf32.tf32.f32", "sm80", "mma.sync", "f32", "f32", "f32"),
    ("MMA", "Ada Lovelace", "m16n8k16.f32.bf16.bf16.f32", "sm89", "mma.sync", "bf16", "bf16", "f32"),
    ("MMA", "Ada Lovelace", "m16n8k32.f32.e4m3.e4m3.f32", "sm89", "mma.sync", "e4m3", "e4m3", "f32"),
    ("MMA", "Ada Lovelace", "m16n8k32.f32.e5m2.e4m3.f32", "sm89", "mma.sync", "e5m2", "e4m3", "f32"),
    ("MMA", "Ada Lovelace", "m16n8k32.f16.e4m3.e5m2.f16", "sm89", "mma.sync", "e4m3", "e5m2", "f16"),
    ("MMA", "Hopper", "m16n8k16.f32.bf16.bf16.f32", "sm90", "mma.sync", "bf16", "bf16", "f32"),
    ("MMA", "Hopper", "m16n8k16.f32.f16.f16.f32", "sm90", "mma.sync", "f16", "f16", "f32"),
    ("MMA", "Hopper", "m16n8k16.f16.f16.f16.f16", "sm90", "mma.sync", "f16", "f16", "f16"),
    ("MMA", "Hopper", "m16n8k8.f32.tf32.tf32.f32", "sm90", "mma.sync", "f32", "f32", "f32"),
    ("WGMMA", "Hopper", "m64n8k16.f32.bf16.bf16", "sm90", "wgmma", "bf16", "bf16", "f32"),
    ("WGMMA", "Hopper", "m64n8k16.f16.f16.f16", "sm90", "wgmma", "f16", "f16", "f16"),
    ("WGMMA", "Hopper", "m64n8k8.f32.tf32.tf32", "sm90", "wgmma", "f32", "f32", "f32"),
    ("WGMMA", "Hopper", "m64n8k32.f32.e4m3.e4m3", "sm90", "wgmma", "e4m3", "e4m3", "f32"),
    ("WGMMA", "Hopper", "m64n8k32.f32.e5m2.e5m2", "sm90", "wgmma", "e5m2", "e5m2", "f32"),
    ("WGMMA", "Hopper", "m64n8k32.f16.e4m3.e5m2", "sm90", "wgmma", "e4m3", "e5m2", "f16"),
    ("MMA", "Blackwell", "m16n8k16.f32.bf16.bf16.f32", "sm100", "mma.sync", "bf16", "bf16", "f32"),
    ("MMA", "Blackwell", "m16n8k8.f32.tf32.tf32.f32", "sm100", "mma.sync", "f32", "f32", "f32"),
    ("TCGen05MMA", "Blackwell", "m64n8k16.kind::f16.f32.bf16.bf16", "sm100", "tcgen05.mma", "bf16", "bf16", "f32"),
    ("TCGen05MMA", "Blackwell", "m64n8k16.kind::f16.f16.f16.f16", "sm100", "tcgen05.mma", "f16", "f16", "f16"),
    ("TCGen05MMA", "Blackwell", "m64n8k8.kind::tf32.f32.tf32.tf32", "sm100", "tcgen05.mma", "f32", "f32", "f32"),
    ("TCGen05MMA", "Blackwell", "m64n8k32.kind::f8f6f4.f32.e4m3.e5m2", "sm100", "tcgen05.mma", "e4m3", "e5m2", "f32"),
    ("TCGen05MMA", "Blackwell", "m64n8k32.kind::f8f6f4.f16.e5m2.e5m2", "sm100", "tcgen05.mma", "e5m2", "e5m2", "f16"),
]

TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
         "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def bits_of(t):
    """Bit patterns of a torch tensor as a numpy uint32 array."""
    width = t.element_size()
    raw = t.contiguous().view(INT_VIEW[width]).numpy().astype(np.int64)
    return (raw & ((1 << (8 * width)) - 1)).astype(np.uint32)


def from_bits(bits, fmt):
    width = torch.finfo(TORCH[fmt]).bits // 8
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
    return torch.from_numpy(bits.astype(dtype).view({1: np.uint8, 2: np.int16, 4: np.int32}[width])).view(TORCH[fmt])


def random_operand(rng, fmt, shape, share):
    """share 0: raw bits; 1: finite bits; 2: Gaussian with a per-row scale."""
    width = torch.finfo(TORCH[fmt]).bits
    if share == 2:
        scale = np.exp2(rng.integers(-8, 9, size=shape[:-1] + (1,)))
        x = torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))
        return x.to(TORCH[fmt])
    bits = rng.integers(0, 1 << width, size=shape, dtype=np.uint64)
    if share == 1:
        bits[~torch.isfinite(from_bits(bits, fmt).float()).numpy()] = 0
    return from_bits(bits, fmt)


def ours(lib, case, a, b, c):
    _, _, _, arch, instruction, fa, fb, facc = case
    T, M, K = a.shape
    N = b.shape[2]
    ab, bb, cb = bits_of(a), bits_of(b), bits_of(c)
    d = np.zeros(T * M * N, dtype=np.uint32)
    def words(x):
        return x.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))

    rc = lib.roundscope_mma(arch.encode(), instruction.encode(), fa.encode(), fb.encode(), facc.encode(),
                            words(ab), words(bb), words(cb), words(d), T, M, N, K)
    if rc != 0:
        raise SystemExit(f"roundscope has no model for {case}")
    return d


def theirs(op, a, b, c):
    T, M, K = a.shape
    N = b.shape[2]
    av = a[:, :, None, :].expand(T, M, N, K)
    bv = b.transpose(1, 2)[:, None, :, :].expand(T, M, N, K)
    return bits_of(op.dpa(av, bv, c)).reshape(-1)


@pytest.fixture(scope="module")
def lib():
    lib = ctypes.CDLL(capi_path())
    lib.roundscope_mma.argtypes = [ctypes.c_char_p] * 5 + [ctypes.POINTER(ctypes.c_uint32)] * 4 + [ctypes.c_int64] * 4
    return lib


@pytest.mark.parametrize("case", CASES, ids=[f"{c[3]} {c[2]}" for c in CASES])
def test_the_models_give_mmasims_bits(lib, case):
    tiles = int(os.environ.get("ROUNDSCOPE_MMASIM_TILES", 100_000))
    rng = np.random.default_rng(20261123)
    kind, arch_name, shape_type = case[:3]
    op = getattr(nv, kind)(arch_name, shape_type)
    K = int(shape_type.split(".")[0].split("k")[1])
    M, N = 16, 8
    chunk = max(1, 4_000_000 // (M * N * K))
    differ, first, done = 0, None, 0
    while done < tiles:
        t = min(chunk, tiles - done)
        share = (done // chunk) % 3
        a = random_operand(rng, case[5], (t, M, K), share)
        b = random_operand(rng, case[6], (t, K, N), share)
        c = random_operand(rng, case[7], (t, M, N), share)
        want, got = theirs(op, a, b, c), ours(lib, case, a, b, c)
        bad = np.nonzero(want != got)[0]
        if bad.size and first is None:
            i = int(bad[0])
            first = f"output {i}: MMA-Sim {want[i]:#x}, roundscope {got[i]:#x}"
        differ += bad.size
        done += t
    assert differ == 0, f"{differ} differ; first {first}"
