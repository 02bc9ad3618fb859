"""A flash-attention forward written in numpy from the recipes' documented arithmetic, sharing no
code with the emulator: the kernels with hidden choices that `roundscope fit` must recover, and a
peer of the emulator's online softmax (tests/peer/test_fit_numpy_kernels.py).

Every float32 operation is numpy's own (IEEE, round to nearest even), the fused multiply-add is
exact (float64 arithmetic with its rounding error corrected), products of tiles are float64 sums
of exact products in key or feature order rounded once to float32, and narrow formats come from
ml_dtypes. One head, no mask. The choices (each a recipe key of the same name):
  kv_order     "forward" | "reverse": the order the KV tiles are visited in
  block_n      the KV tile width
  p_format     "bf16" | "f16" | "f32": P is rounded to it (times p_scale) before P V
  p_scale      P's static scale S (1, 256)
  o_format     "bf16" | "f16" | "f32": O as written
  exp2_arg     "mul-sub" (RN(RN(s c) - m)) | "fma" (RN(s c - m))
  rescale_arg  "scaled" (exp2(RN(m_old - m_new)) on scaled maxima) | "raw" (FlashAttention-2's,
               exp2(RN(RN(m_old - m_new) c)) on the raw scores' maxima)
  row_sum      "sequential" | "quad-ffma" (four lanes of two keys in eight, the first fused with
               the rescale, summed as (l0 + l2) + (l1 + l3))
  scale_log2   "f32" (c = RN(scale RN(log2 e))) | "f64" (c = RN(scale log2 e) from a double product)
  max_offset   k: exp2's argument against the max less k (FlashAttention-3's FP8: 8), as
               fma(m_raw, c, -k) where exp2_arg is "fma", else RN(m - k); P-bar in [0, 2^k]
  row_sum      also "lane-tile" (FlashAttention-3's: each lane sums its keys of the tile in order,
               then l_t = fma(l_t, alpha, that))
  epilogue     "fa2" | "fa3" (O = RN(acc rcp(l)), 0 for an empty row; LSE = fma(m_raw, RN(c RN(ln 2)),
               RN(lg2(l 2^-k) RN(ln 2))))
  kv_splits    the KV tiles cut into this many runs (ceil(tiles / splits) each), each a pass of its
               own whose O stays float32, then FlashAttention-2's combine (below)
  units        the hardware functions "ex2", "lg2", "rcp" (float32 arrays in and out): with them the
               exp2 is the unit's ex2 (exp2="ex2.approx.ftz"), the fa3 epilogue takes lg2 and rcp,
               and the combine's expf its ex2
The exp2 is otherwise the software exp2 the recipes call "software": x = n + f, n = rint(x), 2^f by the
degree-7 Taylor polynomial of e^(f ln 2) in fused steps, times 2^n exactly (one rounding where the
result is subnormal); the log2 of the LSE the atanh series the recipes use.

The combine of split passes is FlashAttention-2's combine kernel as nvcc compiles it for sm_90:
per query row, LSE = logf(sum_s expf(LSE_s - max)) + max and O = sum_s expf(LSE_s - LSE) O_s by
fused multiply-adds in split order from zero; the maximum and the sum over the splits run across
the kernel's lanes (splits padded to a power of two, `width` lanes a row, a lane's splits l width +
lane summed first, then a butterfly over the lanes); expf and logf are libdevice's (CUDA's
documented algorithms: a 2^j split and the unit's ex2; log(m) = u + u^2 p(u) on m in [2/3, 4/3))."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

F32 = np.float32
FORMATS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn}
LOG2E = F32(1.4426950216293334961)  # log2(e) rounded to float32
LN2 = F32(0.693147182464599609375)  # ln(2) rounded to float32


def fma(a, b, c):
    """a b + c rounded once to float32 (a, b, c float32 arrays or scalars)."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    p = a * b  # exact: 24 + 24 bits
    s = p + c
    # the sum's rounding error, exactly (two-sum; NaN where s is infinite, and unused there)
    with np.errstate(invalid="ignore"):
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
    r = s.astype(F32)
    # double rounding errs only where s lands exactly between two float32 values: there the
    # error's sign says which of the two the exact sum is nearer
    r64 = r.astype(np.float64)
    other = np.nextafter(r, np.where(s > r64, F32(np.inf), F32(-np.inf))).astype(np.float64)
    midpoint = (s != r64) & (s == (r64 + other) / 2) & (err != 0)
    fixed = np.where(midpoint & ((err > 0) == (other > r64)), other.astype(F32), r)
    return fixed.astype(F32)


def _soft_exp2(x):
    x = np.asarray(x, dtype=F32)
    nan, over, under = np.isnan(x), x >= F32(128), x < F32(-151)
    xc = np.where(nan | over | under, F32(0), x).astype(F32)
    shift = F32(12582912.0)  # 1.5 2^23
    shifted = (xc + shift).astype(F32)
    n = (shifted - shift).astype(F32)
    f = (xc - n).astype(F32)
    e = shifted.view(np.int32).astype(np.int64) - np.array(shift, dtype=F32).view(np.int32).astype(np.int64)
    p = F32(float.fromhex("0x1.ffcbfcp-17"))
    for coefficient in ("0x1.430912p-13", "0x1.5d87fep-10", "0x1.3b2ab6p-7", "0x1.c6b08ep-5", "0x1.ebfbe0p-3",
                        "0x1.62e430p-1", "0x1p0"):
        p = fma(p, f, F32(float.fromhex(coefficient)))
    e1 = np.where(e < -126, e + 64, np.where(e > 127, e - 1, e))
    second = np.where(e < -126, F32(2.0 ** -64), np.where(e > 127, F32(2), F32(1))).astype(F32)
    two_e1 = ((e1 + 127).astype(np.uint32) << np.uint32(23)).view(F32)
    y = ((p * two_e1).astype(F32) * second).astype(F32)
    return np.where(nan, x, np.where(over, F32(np.inf), np.where(under, F32(0), y))).astype(F32)


def soft_log2(x: np.float32) -> np.float32:
    x = F32(x)
    if not x > 0:
        return F32(-np.inf) if x == 0 else F32(np.nan)
    if np.isinf(x):
        return x
    e = 0
    if x < F32(2.0 ** -126):
        x, e = F32(x * F32(2.0 ** 32)), -32
    bits = int(np.array(x, dtype=F32).view(np.uint32))
    e += ((bits >> 23) & 0xFF) - 127
    m = np.array((bits & 0x007FFFFF) | 0x3F800000, dtype=np.uint32).view(F32)[()]
    if m > F32(float.fromhex("0x1.6a09e6p0")):
        m, e = F32(m * F32(0.5)), e + 1
    t = F32(F32(m - F32(1)) / F32(m + F32(1)))
    t2 = F32(t * t)
    s = F32(float.fromhex("0x1.745d18p-4"))
    for coefficient in ("0x1.c71c72p-4", "0x1.24924ap-3", "0x1.99999ap-3", "0x1.555556p-2", "0x1p0"):
        s = fma(s, t2, F32(float.fromhex(coefficient)))[()]
    log2_m = F32(F32(s * t) * F32(float.fromhex("0x1.715476p+1")))
    return F32(F32(e) + log2_m)


def rounded(x, format_name):
    """x (float32) rounded to the format, nearest even, saturating at its largest finite value."""
    t = FORMATS[format_name]
    narrow = (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn)  # numpy's finfo knows neither
    big = float(ml_dtypes.finfo(t).max) if t in narrow else float(np.finfo(t).max)
    x = np.asarray(x, dtype=F32)
    y = x.astype(t)
    over = ~np.isfinite(y.astype(np.float64)) & np.isfinite(x)  # Inf, or e4m3's NaN, from a finite x
    clipped = np.where(over, np.copysign(big, x), y.astype(np.float64))
    return clipped.astype(t)


def product(a, b, c=None):
    """C + sum_t A[:, t] B[t, :] with exact products summed in float64 in order t, rounded once."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    acc = np.zeros((a.shape[0], b.shape[1])) if c is None else np.asarray(c, dtype=F32).astype(np.float64)
    for t in range(a.shape[1]):
        acc = acc + a[:, t:t + 1] * b[t:t + 1, :]
    return acc.astype(F32)


def flash_forward(q, k, v, *, scale: float, block_n=64, o_format="bf16", kv_splits=1, units=None, **choices):
    """One head: q [N, D], k [N, D], v [N, Dv] already in the input format (as float32). Returns
    (o in o_format, lse float32)."""
    n_kv = k.shape[0]
    tiles = [(b, min(n_kv, b + block_n)) for b in range(0, n_kv, block_n)]
    if kv_splits == 1:
        o, lse = _forward_pass(q, k, v, tiles, scale=scale, units=units, **choices)
        return rounded(o, o_format), lse
    assert units is not None, "the combine's expf takes the hardware's ex2 (units)"
    per_split = -(-len(tiles) // kv_splits)
    passes = [_forward_pass(q, k, v, tiles[s * per_split:(s + 1) * per_split], scale=scale, units=units, **choices)
              for s in range(kv_splits)]
    return _combine(passes, q.shape[1], o_format, units["ex2"])


def libdevice_expf(x, ex2):
    """CUDA's expf: j = floor(x log2 e) from a saturated fused step into 1.5 2^23 + 1 (whose low
    bits hold j + 126), 2^j from those bits, f = x log2 e - j in two fused steps, 2^j ex2(f)."""
    x = np.asarray(x, dtype=F32)
    t = fma(x, np.array(0x3BBB989D, dtype=np.uint32).view(F32), F32(0.5))  # log2 e / 252
    t = np.where(np.isnan(t), F32(0), np.clip(t, F32(0), F32(1))).astype(F32)
    n = np.floor(t.astype(np.float64) * 252.0).astype(np.uint32)  # rounding down: the floor
    r_bits = (np.uint32(0x4B400001) + n).astype(np.uint32)
    j = (r_bits.view(F32) + F32(-12583039.0)).astype(F32)
    two_j = (r_bits << np.uint32(23)).astype(np.uint32).view(F32)
    f = fma(x, F32(1.4426950216293334961), -j)
    f = fma(x, F32(1.925963033500011079e-08), f)
    return (two_j * ex2(f)).astype(F32)


def libdevice_logf(x):
    """CUDA's logf: x = 2^k m, m in [2/3, 4/3) from the bits, u = m - 1, log(m) = u + u^2 p(u) (p of
    degree 8 in fused steps), plus k ln 2; subnormals scaled by 2^23 first."""
    x = np.asarray(x, dtype=F32)
    small = ~(x >= F32(2.0 ** -126))
    x = np.where(small, (x * F32(8388608.0)).astype(F32), x).astype(F32)
    e0 = np.where(small, F32(-23), F32(0)).astype(F32)
    bits = x.view(np.uint32)
    k_bits = ((bits - np.uint32(0x3F2AAAAB)).astype(np.uint32) & np.uint32(0xFF800000)).astype(np.uint32)
    u = ((bits - k_bits).astype(np.uint32).view(F32) + F32(-1)).astype(F32)
    k = fma(k_bits.view(np.int32).astype(F32), F32(2.0 ** -23), e0)
    p = fma(u, -np.array(0x3E055027, dtype=np.uint32).view(F32), F32(0.14084610342979431152))
    for coefficient in (-0.12148627638816833496, 0.13980610668659210205, -0.16684235632419586182,
                        0.20012299716472625732, -0.24999669194221496582, 0.33333182334899902344, -0.5):
        p = fma(u, p, F32(coefficient))
    p = (u * p).astype(F32)
    r = fma(k, F32(0.69314718246459960938), fma(u, p, u))
    with np.errstate(invalid="ignore"):
        special = fma(x, F32(np.inf), F32(np.inf))  # +inf, NaN and negatives
    r = np.where(bits >= np.uint32(0x7F800000), special, r)
    return np.where(x != 0, r, F32(-np.inf)).astype(F32)


def _combine(passes, d, o_format, ex2):
    """FlashAttention-2's combine of the split passes ((O float32, LSE) each) into (O, LSE)."""
    block_m = 4 if d % 128 == 0 else 8 if d % 64 == 0 else 16  # the combine kernel's rows a block
    max_splits = 2
    while max_splits < len(passes):
        max_splits *= 2
    width = min(128 // block_m, max_splits)
    per_lane = (max_splits * block_m + 127) // 128
    lse = [p[1] for p in passes] + [np.full_like(passes[0][1], -np.inf)] * (width * per_lane - len(passes))

    def across_lanes(term, op):
        x = [term(lse[lane]) for lane in range(width)]
        for lane in range(width):
            for lane_split in range(1, per_lane):
                x[lane] = op(x[lane], term(lse[lane_split * width + lane]))
        offset = width // 2
        while offset >= 1:
            x = [op(x[lane], x[lane ^ offset]) for lane in range(width)]
            offset //= 2
        return x[0]

    def add(a, b):
        return (a + b).astype(F32)

    lse_max = across_lanes(lambda x: x, np.fmax)
    lse_max = np.where(lse_max == -np.inf, F32(0), lse_max).astype(F32)
    total = across_lanes(lambda x: libdevice_expf((x - lse_max).astype(F32), ex2), add)
    empty = (total == 0) | np.isnan(total)
    lse_out = np.where(empty, F32(np.inf), (libdevice_logf(np.where(empty, F32(1), total)) + lse_max)).astype(F32)
    o = np.zeros_like(passes[0][0])
    for o_split, lse_split in passes:
        weight = libdevice_expf((lse_split - lse_out).astype(F32), ex2)
        o = fma(weight[:, None], o_split, o)
    return rounded(o, o_format), lse_out


def _forward_pass(q, k, v, tiles, *, scale: float, kv_order="forward", p_format="bf16", p_scale=1.0,
                  exp2_arg="mul-sub", rescale_arg="scaled", row_sum="sequential", scale_log2="f32", max_offset=0,
                  epilogue="fa2", exp2="software", units=None):
    """The online softmax over the KV tiles `tiles` (spans of keys): (O in float32, LSE)."""
    if exp2 != "software" or epilogue == "fa3":
        assert units is not None, "the hardware's exp2, lg2 and rcp are given as units"
    soft_exp2 = _soft_exp2 if exp2 == "software" else (lambda x: units["ex2"](np.asarray(x, dtype=F32)))
    n_q, d_v = q.shape[0], v.shape[1]
    s_scale = F32(scale)
    c = F32(s_scale * LOG2E) if scale_log2 == "f32" else F32(float(s_scale) * math.log2(math.e))
    p_scale = F32(p_scale)
    tiles = list(tiles)
    if kv_order == "reverse":
        tiles.reverse()
    m = np.full(n_q, -np.inf, dtype=F32)
    m_raw = np.full(n_q, -np.inf, dtype=F32)
    ell = np.zeros(n_q, dtype=F32)
    lanes = np.zeros((n_q, 4), dtype=F32)
    acc = np.zeros((n_q, d_v), dtype=F32)
    for begin, end in tiles:
        s = product(q, k[begin:end].T)  # [n_q, keys]
        t = (s * c).astype(F32)
        m_new = np.maximum(m, t.max(axis=1))
        raw_new = np.maximum(m_raw, s.max(axis=1))
        usable = np.where(m_new == -np.inf, F32(0), m_new).astype(F32)
        if rescale_arg == "scaled":
            factor = np.where(m == -np.inf, F32(0), soft_exp2((m - usable).astype(F32)))
        else:
            usable_raw = np.where(raw_new == -np.inf, F32(0), raw_new).astype(F32)
            factor = np.where(m_raw == -np.inf, F32(0),
                              soft_exp2((((m_raw - usable_raw).astype(F32)) * c).astype(F32)))
        factor = factor.astype(F32)
        if max_offset:  # FlashAttention-3's max_scaled, 0 while the row has no key
            shifted = fma(raw_new, c, F32(-max_offset)) if exp2_arg == "fma" else (usable - F32(max_offset))
            usable = np.where(m_new == -np.inf, F32(0), shifted).astype(F32)
        if exp2_arg == "fma":
            arg = fma(s, c, -usable[:, None])
        else:
            arg = (t - usable[:, None]).astype(F32)
        p = soft_exp2(arg)
        p_cast = rounded((p * p_scale).astype(F32), p_format)
        if row_sum == "sequential":
            total = np.zeros(n_q, dtype=F32)
            for j in range(end - begin):
                total = (total + p[:, j]).astype(F32)
            ell = ((ell * factor).astype(F32) + total).astype(F32)
        elif row_sum == "lane-tile":
            for lane in range(4):
                keys = [j for j in range(end - begin) if (j % 8) // 2 == lane]
                total = p[:, keys[0]] if keys else np.zeros(n_q, dtype=F32)
                for j in keys[1:]:
                    total = (total + p[:, j]).astype(F32)
                lanes[:, lane] = fma(lanes[:, lane], factor, total)
            ell = ((lanes[:, 0] + lanes[:, 2]).astype(F32) + (lanes[:, 1] + lanes[:, 3]).astype(F32)).astype(F32)
        else:
            for j in range(end - begin):
                lane = (j % 8) // 2
                if j < 8 and j % 2 == 0:
                    lanes[:, lane] = fma(lanes[:, lane], factor, p[:, j])
                else:
                    lanes[:, lane] = (lanes[:, lane] + p[:, j]).astype(F32)
            for lane in range(4):
                if 2 * lane >= end - begin:
                    lanes[:, lane] = (lanes[:, lane] * factor).astype(F32)
            ell = ((lanes[:, 0] + lanes[:, 2]).astype(F32) + (lanes[:, 1] + lanes[:, 3]).astype(F32)).astype(F32)
        m, m_raw = m_new, raw_new
        acc = (acc * factor[:, None]).astype(F32)
        acc = product(p_cast.astype(F32), v[begin:end], acc)
    unscaled = (ell * F32(2.0 ** -max_offset)).astype(F32)  # l without the offset's 2^k (exact)
    if epilogue == "fa3":
        empty = (ell == 0) | np.isnan(ell)
        out_factor = np.where(empty, F32(0), units["rcp"](np.where(empty, F32(1), ell).astype(F32))).astype(F32)
        o = (acc * out_factor[:, None]).astype(F32)
        log_l = (units["lg2"](np.where(empty, F32(1), unscaled).astype(F32)) * LN2).astype(F32)
        lse = np.where(empty, F32(-np.inf), fma(m_raw, F32(c * LN2), log_l)).astype(F32)
        return o, lse
    out_factor = np.where(ell == 0, F32(1), (F32(1) / (ell * p_scale).astype(F32)).astype(F32)).astype(F32)
    o = (acc * out_factor[:, None]).astype(F32)
    lse = np.array([F32(F32((F32(0) if mi == -np.inf else mi) + soft_log2(li)) * LN2) if li != 0 else F32(-np.inf)
                    for mi, li in zip(m, unscaled)], dtype=F32)
    return o, lse
