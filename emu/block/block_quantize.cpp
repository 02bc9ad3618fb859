#include "emu/block/block_quantize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "emu/batch/batch_cast.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/block/mx_block.hpp"
#include "emu/block/nvfp4_block.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

// The tensor seen as [outer, length, inner] with blocks along `length`.
struct BlockLayout {
    std::uint64_t outer = 1, length = 1, inner = 1, blocks = 0;
    int axis = 0, block = 0, offset = 0;

    std::uint64_t first(std::uint64_t j) const {
        return j * block < static_cast<std::uint64_t>(offset) ? 0 : j * block - offset;
    }
    std::uint64_t end(std::uint64_t j) const { return std::min<std::uint64_t>(length, (j + 1) * block - offset); }
    std::uint64_t element(std::uint64_t o, std::uint64_t pos, std::uint64_t in) const {
        return (o * length + pos) * inner + in;
    }
    std::uint64_t scale(std::uint64_t o, std::uint64_t j, std::uint64_t in) const {
        return (o * blocks + j) * inner + in;
    }
};

BlockLayout layout_of(const Tensor& t, const BlockSpec& spec, const Shape& shape) {
    const int rank = static_cast<int>(shape.size());
    auto fail = [&](const std::string& what) -> BlockLayout { throw Error("tensor '" + t.name() + "': " + what); };
    if (rank == 0) return fail("a scalar has no axis to block");
    BlockLayout l;
    l.axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
    if (l.axis < 0 || l.axis >= rank)
        return fail("axis " + std::to_string(spec.axis) + " is outside shape " + shape_string(shape));
    l.block = spec.block > 0 ? spec.block : spec.format->default_block;
    if (spec.block < 0 || l.block > (1 << 20))
        return fail("block size " + std::to_string(spec.block) + " is not in 1..2^20");
    if (spec.format->nvfp4 && l.block != nvfp4_block_size) return fail("NVFP4 blocks hold 16 elements");
    if (spec.offset < 0 || spec.offset >= l.block)
        return fail("block offset " + std::to_string(spec.offset) + " is not in 0.." + std::to_string(l.block - 1));
    l.offset = spec.offset;
    for (int d = 0; d < l.axis; ++d) l.outer *= shape[d];
    l.length = shape[l.axis];
    for (int d = l.axis + 1; d < rank; ++d) l.inner *= shape[d];
    l.blocks = l.length == 0 ? 0 : (l.length + l.offset + l.block - 1) / l.block;
    return l;
}

Shape scales_shape(const Shape& shape, const BlockLayout& l) {
    Shape s = shape;
    s[l.axis] = l.blocks;
    return s;
}

float tensor_amax_f32(const Tensor& t, int threads) {
    const std::vector<float> v = decode_tensor<float>(t, threads);
    float amax = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i]))
            throw Error("tensor '" + t.name() + "': element " + std::to_string(i) +
                        " is not finite; NVFP4's per-tensor scale needs a finite tensor");
        amax = std::max(amax, std::fabs(v[i]));
    }
    return amax;
}

// Can every element be decoded to double, and scaled by 2^-k for |k| <= 127, exactly? (Not
// for f64 subnormals scaled further down, nor 64-bit integers above 2^53.)
bool exact_in_double_after_scaling(DType t) { return t != DType::f64 && t != DType::i64 && t != DType::u64; }

// The batch MX path. Rows of blocks (outer index o, block j) in order cover one contiguous
// range of the tensor, whichever the axis: decode the range, find each block's amax and shared
// exponent (mx_shared_exponent, as the reference), scale by 2^-k exactly, and round the whole
// range with one SIMD batch cast whose random streams are the elements' flat indices.
// tests/emu/block/test_mx_examples.cpp checks it against mx_quantize_block.
//
// Real = float serves sources of 16 bits or fewer (exact in float) when every scaled value
// stays a normal float or zero, which is what returns true; otherwise the caller repeats the
// rows in double, where 2^-k scaling is always exact.
template <class Real>
bool mx_quantize_rows(const Tensor& t, const BlockLayout& l, const BlockSpec& spec, std::size_t row_begin,
                      std::size_t row_end, std::byte* elements, std::byte* scales) {
    const Format& element = *spec.format->element;
    CastOptions o = spec.element_options;
    o.saturate = true;
    const std::uint64_t first = l.element(row_begin / l.blocks, l.first(row_begin % l.blocks), 0);
    const std::uint64_t last = l.element((row_end - 1) / l.blocks, l.end((row_end - 1) % l.blocks), 0);
    // Buffers kept per thread: fresh ones for every chunk would fault their pages in each time.
    thread_local std::vector<Real> x;
    thread_local std::vector<std::uint8_t> out;
    x.resize(last - first);
    out.resize(x.size());
    decode_elements<Real>(t, first, x);
    const std::uint8_t nan_element = static_cast<std::uint8_t>(has_nan(element) ? canonical_nan_bits(element) : 0);
    struct NanBlock {
        std::uint64_t start, in, n;  // offset in x of the block's row, its column, its length
    };
    thread_local std::vector<NanBlock> nan_blocks;
    nan_blocks.clear();
    constexpr double smallest_normal = std::is_same_v<Real, float> ? 0x1p-126 : 0x1p-1022;
    bool exact = true;
    Real* row_x = x.data();
    for (std::size_t row = row_begin; row < row_end && exact; ++row) {
        const std::uint64_t oi = row / l.blocks, j = row % l.blocks, n = l.end(j) - l.first(j);
        // Column by column, so that the running extremes stay in registers; with blocks along
        // the last axis the stride is the constant 1 and the loops vectorize.
        auto column = [&](auto stride, std::uint64_t in) {
            // On magnitude bit patterns, which order as the magnitudes do: integer max and min
            // reductions vectorize. Zero becomes the largest pattern under "- 1", so `low` is
            // the smallest nonzero magnitude (0 if there is none).
            using Bits = std::conditional_t<std::is_same_v<Real, float>, std::uint32_t, std::uint64_t>;
            constexpr Bits magnitude = ~Bits{0} >> 1;
            Bits high_bits = 0, low_bits_minus_one = ~Bits{0};
            for (std::uint64_t p = 0; p < n; ++p) {
                const Bits a = std::bit_cast<Bits>(row_x[p * stride + in]) & magnitude;
                high_bits = a > high_bits ? a : high_bits;
                low_bits_minus_one = a - 1 < low_bits_minus_one ? a - 1 : low_bits_minus_one;
            }
            const Real high = std::bit_cast<Real>(high_bits),
                       low = std::bit_cast<Real>(static_cast<Bits>(low_bits_minus_one + 1));
            const bool not_finite = high_bits >= std::bit_cast<Bits>(std::numeric_limits<Real>::infinity());
            const int k = not_finite
                              ? 0
                              : mx_shared_exponent(unpack(f64, bits_of(static_cast<double>(high))), element, spec.rule);
            scales[l.scale(oi, j, in)] =
                static_cast<std::byte>(not_finite ? e8m0_nan : static_cast<std::uint64_t>(k + 127));
            if (not_finite) nan_blocks.push_back({static_cast<std::uint64_t>(row_x - x.data()), in, n});
            const double factor = double_from_bits(static_cast<std::uint64_t>(1023 - k) << 52);  // 2^-k
            if (!not_finite && high != 0 && static_cast<double>(low) * factor < smallest_normal) exact = false;
            for (std::uint64_t p = 0; p < n; ++p) row_x[p * stride + in] *= static_cast<Real>(factor);
        };
        if (l.inner == 1) {
            column(std::integral_constant<std::uint64_t, 1>{}, 0);
        } else {
            for (std::uint64_t in = 0; in < l.inner; ++in) column(l.inner, in);
        }
        row_x += n * l.inner;
    }
    if (!exact) return false;
    cast_batch<Real, std::uint8_t>(x, element, o, out, BatchSpec{first, 1});
    // Blocks with the NaN scale: every element NaN (0 where the format has none).
    for (const NanBlock& b : nan_blocks)
        for (std::uint64_t p = 0; p < b.n; ++p) out[b.start + p * l.inner + b.in] = nan_element;
    std::memcpy(elements + first, out.data(), out.size());
    return true;
}

}  // namespace

BlockQuantized block_quantize(const Tensor& t, const BlockSpec& spec) {
    const BlockLayout l = layout_of(t, spec, t.shape());
    const BlockFormat& f = *spec.format;
    BlockQuantized q{Tensor::zeros(t.name() + ".elements", dtype_of(*f.element), t.shape()),
                     Tensor::zeros(t.name() + ".scales", dtype_of(*f.scale), scales_shape(t.shape(), l)), std::nullopt};
    if (t.size() == 0) return q;  // an empty axis: no blocks (and nothing to divide work by)
    float per_tensor = 1.0f;
    if (f.nvfp4) {  // NaN or Inf is an Error for NVFP4, single- or two-level
        const float amax = tensor_amax_f32(t, spec.threads);
        if (spec.per_tensor_scale) q.per_tensor_scale = per_tensor = nvfp4_per_tensor_scale(amax);
    }
    std::byte* elements = q.elements.mutable_bytes().data();
    std::byte* scales = q.scales.mutable_bytes().data();
    const std::uint64_t rows = l.outer * l.blocks;
    const std::size_t grain =
        std::max<std::uint64_t>(1, (std::uint64_t{1} << 16) / (static_cast<std::uint64_t>(l.block) * l.inner));
    const bool batch = !f.nvfp4 && exact_in_double_after_scaling(t.dtype()) && !spec.scalar_reference;
    // Every value of these is a float.
    const bool float_source = info(t.dtype()).storage_bytes <= 2 || t.dtype() == DType::f32;
    parallel_for(rows, grain, spec.threads, [&](std::size_t row_begin, std::size_t row_end) {
        if (batch) {
            if (float_source && mx_quantize_rows<float>(t, l, spec, row_begin, row_end, elements, scales)) return;
            mx_quantize_rows<double>(t, l, spec, row_begin, row_end, elements, scales);
            return;
        }
        std::vector<Unpacked> v(l.block);
        std::vector<float> v32(l.block);
        std::vector<std::uint64_t> index(l.block), out(l.block);
        for (std::size_t row = row_begin; row < row_end; ++row) {
            const std::uint64_t o = row / l.blocks, j = row % l.blocks;
            const std::uint64_t begin = l.first(j);
            const int n = static_cast<int>(l.end(j) - begin);
            for (std::uint64_t in = 0; in < l.inner; ++in) {
                for (int i = 0; i < n; ++i) index[i] = l.element(o, begin + i, in);
                std::uint64_t scale = 0;
                if (f.nvfp4) {
                    for (int i = 0; i < n; ++i) {  // finite (tensor_amax_f32 checked), to float nearest-even
                        const Unpacked u = unpack_element(t, index[i]);
                        v32[i] = static_cast<float>(exact_double(u.negative, u.cls == ValueClass::zero ? 0 : u.m, u.e));
                    }
                    scale =
                        nvfp4_quantize_block(v32.data(), n, per_tensor, spec.element_options, index.data(), out.data());
                } else {
                    for (int i = 0; i < n; ++i) v[i] = unpack_element(t, index[i]);
                    scale = mx_quantize_block(v.data(), n, *f.element, spec.rule, spec.element_options, index.data(),
                                              out.data());
                }
                for (int i = 0; i < n; ++i) elements[index[i]] = static_cast<std::byte>(out[i]);
                scales[l.scale(o, j, in)] = static_cast<std::byte>(scale);
            }
        }
    });
    return q;
}

Tensor block_dequantize(const BlockQuantized& q, const BlockSpec& spec) {
    const Shape& shape = q.elements.shape();
    const BlockLayout l = layout_of(q.elements, spec, shape);
    if (q.scales.shape() != scales_shape(shape, l))
        throw Error("tensor '" + q.scales.name() + "': shape " + shape_string(q.scales.shape()) +
                    " does not match elements " + shape_string(shape) + " in blocks of " + std::to_string(l.block));
    const BlockFormat& f = *spec.format;
    const float per_tensor = q.per_tensor_scale.value_or(1.0f);
    std::string name = q.elements.name();
    if (name.ends_with(".elements")) name.resize(name.size() - 9);
    Tensor out = Tensor::zeros(name, DType::f32, shape);
    if (out.size() == 0) return out;
    float* values = reinterpret_cast<float*>(out.mutable_bytes().data());
    if (f.nvfp4) {
        parallel_for(q.elements.size(), std::size_t{1} << 16, spec.threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) {
                const std::uint64_t in = i % l.inner, pos = (i / l.inner) % l.length, o = i / (l.inner * l.length);
                const std::uint64_t scale = q.scales.bits_at(l.scale(o, (pos + l.offset) / l.block, in));
                values[i] = nvfp4_dequantize(q.elements.bits_at(i), scale, per_tensor);
            }
        });
        return out;
    }
    // MX, a row of blocks at a time (a contiguous range): decode the elements through the
    // value table, multiply by 2^(scale - 127) exactly in double, round once to float.
    const std::uint64_t rows = l.outer * l.blocks;
    const std::size_t grain =
        std::max<std::uint64_t>(1, (std::uint64_t{1} << 16) / (static_cast<std::uint64_t>(l.block) * l.inner));
    parallel_for(rows, grain, spec.threads, [&](std::size_t row_begin, std::size_t row_end) {
        std::vector<double> x;
        for (std::size_t row = row_begin; row < row_end; ++row) {
            const std::uint64_t oi = row / l.blocks, j = row % l.blocks, n = l.end(j) - l.first(j);
            const std::uint64_t first = l.element(oi, l.first(j), 0);
            x.resize(n * l.inner);
            decode_elements<double>(q.elements, first, x);
            for (std::uint64_t in = 0; in < l.inner; ++in) {
                const std::uint64_t scale = q.scales.bits_at(l.scale(oi, j, in));
                const double factor = scale == e8m0_nan ? std::numeric_limits<double>::quiet_NaN()
                                                        : double_from_bits((scale - 127 + 1023) << 52);
                for (std::uint64_t p = 0; p < n; ++p)
                    values[first + p * l.inner + in] = static_cast<float>(x[p * l.inner + in] * factor);
            }
        }
    });
    return out;
}

}  // namespace roundscope::emu
