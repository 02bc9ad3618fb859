#include "emu/block_quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "emu/batch_cast.hpp"
#include "emu/mx_block.hpp"
#include "emu/nvfp4_block.hpp"
#include "emu/tensor_cast.hpp"
#include "emu/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

// The tensor seen as [outer, length, inner] with blocks along `length`.
struct BlockLayout {
    std::uint64_t outer = 1, length = 1, inner = 1, blocks = 0;
    int axis = 0, block = 0, offset = 0;

    std::uint64_t first(std::uint64_t j) const { return j * block < static_cast<std::uint64_t>(offset) ? 0 : j * block - offset; }
    std::uint64_t end(std::uint64_t j) const { return std::min<std::uint64_t>(length, (j + 1) * block - offset); }
    std::uint64_t element(std::uint64_t o, std::uint64_t pos, std::uint64_t in) const { return (o * length + pos) * inner + in; }
    std::uint64_t scale(std::uint64_t o, std::uint64_t j, std::uint64_t in) const { return (o * blocks + j) * inner + in; }
};

BlockLayout layout_of(const Tensor& t, const BlockSpec& spec, const Shape& shape) {
    const int rank = static_cast<int>(shape.size());
    auto fail = [&](const std::string& what) -> BlockLayout { throw Error("tensor '" + t.name() + "': " + what); };
    if (rank == 0) return fail("a scalar has no axis to block");
    BlockLayout l;
    l.axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
    if (l.axis < 0 || l.axis >= rank)
        return fail("--axis " + std::to_string(spec.axis) + " is outside shape " + shape_string(shape));
    l.block = spec.block > 0 ? spec.block : spec.format->default_block;
    if (spec.block < 0 || l.block > (1 << 20)) return fail("block size " + std::to_string(spec.block) + " is not in 1..2^20");
    if (spec.format->nvfp4 && l.block != nvfp4_block_size) return fail("NVFP4 blocks hold 16 elements");
    if (spec.offset < 0 || spec.offset >= l.block)
        return fail("block offset " + std::to_string(spec.offset) + " is not in 0.." + std::to_string(l.block - 1));
    l.offset = spec.offset;
    for (int d = 0; d < l.axis; ++d) l.outer *= shape[d];
    l.length = shape[l.axis];
    for (int d = l.axis + 1; d < rank; ++d) l.inner *= shape[d];
    l.blocks = (l.length + l.offset + l.block - 1) / l.block;
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
bool exact_in_double_after_scaling(DType t) {
    return t != DType::f64 && t != DType::i64 && t != DType::u64;
}

// The batch MX path. For one row of blocks (outer index o, block j), the elements of every
// column `in` lie in one contiguous range of the tensor: decode it, find each column's amax
// and shared exponent (mx_shared_exponent, as the reference), scale by 2^-k exactly in double,
// and round the whole range with the SIMD batch cast, whose random streams are the elements'
// flat indices. tests/emu/test_mx_examples.cpp checks it against mx_quantize_block.
void mx_quantize_rows(const Tensor& t, const BlockLayout& l, const BlockSpec& spec, std::size_t row_begin,
                      std::size_t row_end, std::byte* elements, std::byte* scales) {
    const Format& element = *spec.format->element;
    CastOptions o = spec.element_options;
    o.saturate = true;
    std::vector<double> x;
    std::vector<std::uint8_t> out;
    std::vector<double> amax(l.inner), factor(l.inner);
    std::vector<char> special(l.inner);
    for (std::size_t row = row_begin; row < row_end; ++row) {
        const std::uint64_t oi = row / l.blocks, j = row % l.blocks;
        const std::uint64_t first = l.element(oi, l.first(j), 0), count = (l.end(j) - l.first(j)) * l.inner;
        x.resize(count);
        out.resize(count);
        decode_elements<double>(t, first, x);
        std::fill(amax.begin(), amax.end(), 0.0);
        std::fill(special.begin(), special.end(), 0);
        for (std::uint64_t i = 0; i < count; ++i) {
            const double a = std::fabs(x[i]);
            const std::uint64_t in = i % l.inner;
            if (!(a <= 1.7976931348623157e308)) special[in] = 1;  // NaN or Inf
            else if (a > amax[in]) amax[in] = a;
        }
        for (std::uint64_t in = 0; in < l.inner; ++in) {
            const int k = mx_shared_exponent(unpack(f64, bits_of(amax[in])), element, spec.rule);
            factor[in] = std::ldexp(1.0, -k);
            scales[l.scale(oi, j, in)] = static_cast<std::byte>(special[in] ? e8m0_nan : static_cast<std::uint64_t>(k + 127));
        }
        for (std::uint64_t i = 0; i < count; ++i) x[i] *= factor[i % l.inner];  // exact: a power of two in range
        cast_batch<double, std::uint8_t>(x, element, o, out, BatchSpec{first, 1});
        const std::uint8_t nan_element = static_cast<std::uint8_t>(has_nan(element) ? canonical_nan_bits(element) : 0);
        for (std::uint64_t i = 0; i < count; ++i)
            elements[first + i] = static_cast<std::byte>(special[i % l.inner] ? nan_element : out[i]);
    }
}

}  // namespace

BlockQuantized block_quantize(const Tensor& t, const BlockSpec& spec) {
    const BlockLayout l = layout_of(t, spec, t.shape());
    const BlockFormat& f = *spec.format;
    BlockQuantized q{Tensor::zeros(t.name() + ".elements", dtype_of(*f.element), t.shape()),
                     Tensor::zeros(t.name() + ".scales", dtype_of(*f.scale), scales_shape(t.shape(), l)), std::nullopt};
    float per_tensor = 1.0f;
    if (f.nvfp4) {  // NaN or Inf is an Error for NVFP4, single- or two-level
        const float amax = tensor_amax_f32(t, spec.threads);
        if (spec.per_tensor_scale) q.per_tensor_scale = per_tensor = nvfp4_per_tensor_scale(amax);
    }
    std::byte* elements = q.elements.mutable_bytes().data();
    std::byte* scales = q.scales.mutable_bytes().data();
    const std::uint64_t rows = l.outer * l.blocks;
    const std::size_t grain = std::max<std::uint64_t>(1, (std::uint64_t{1} << 16) / (static_cast<std::uint64_t>(l.block) * l.inner));
    const bool batch = !f.nvfp4 && exact_in_double_after_scaling(t.dtype()) && !spec.scalar_reference;
    parallel_for(rows, grain, spec.threads, [&](std::size_t row_begin, std::size_t row_end) {
        if (batch) return mx_quantize_rows(t, l, spec, row_begin, row_end, elements, scales);
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
                    scale = nvfp4_quantize_block(v32.data(), n, per_tensor, spec.element_options, index.data(), out.data());
                } else {
                    for (int i = 0; i < n; ++i) v[i] = unpack_element(t, index[i]);
                    scale = mx_quantize_block(v.data(), n, *f.element, spec.rule, spec.element_options, index.data(), out.data());
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
        throw Error("tensor '" + q.scales.name() + "': shape " + shape_string(q.scales.shape()) + " does not match elements " +
                    shape_string(shape) + " in blocks of " + std::to_string(l.block));
    const BlockFormat& f = *spec.format;
    const float per_tensor = q.per_tensor_scale.value_or(1.0f);
    std::string name = q.elements.name();
    if (name.ends_with(".elements")) name.resize(name.size() - 9);
    Tensor out = Tensor::zeros(name, DType::f32, shape);
    float* values = reinterpret_cast<float*>(out.mutable_bytes().data());
    parallel_for(q.elements.size(), std::size_t{1} << 16, spec.threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            const std::uint64_t in = i % l.inner, pos = (i / l.inner) % l.length, o = i / (l.inner * l.length);
            const std::uint64_t scale = q.scales.bits_at(l.scale(o, (pos + l.offset) / l.block, in));
            const std::uint64_t p = q.elements.bits_at(i);
            values[i] = f.nvfp4 ? nvfp4_dequantize(p, scale, per_tensor)
                                : static_cast<float>(mx_dequantize(*f.element, p, scale));
        }
    });
    return out;
}

}  // namespace roundscope::emu
