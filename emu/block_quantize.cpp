#include "emu/block_quantize.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

}  // namespace

BlockQuantized block_quantize(const Tensor& t, const BlockSpec& spec) {
    const BlockLayout l = layout_of(t, spec, t.shape());
    const BlockFormat& f = *spec.format;
    BlockQuantized q{Tensor::zeros(t.name() + ".elements", dtype_of(*f.element), t.shape()),
                     Tensor::zeros(t.name() + ".scales", dtype_of(*f.scale), scales_shape(t.shape(), l)), std::nullopt};
    float per_tensor = 1.0f;
    if (f.nvfp4 && spec.per_tensor_scale) {
        per_tensor = nvfp4_per_tensor_scale(tensor_amax_f32(t, spec.threads));
        q.per_tensor_scale = per_tensor;
    }
    std::byte* elements = q.elements.mutable_bytes().data();
    std::byte* scales = q.scales.mutable_bytes().data();
    const std::uint64_t rows = l.outer * l.blocks;
    const std::size_t grain = std::max<std::uint64_t>(1, (std::uint64_t{1} << 16) / (static_cast<std::uint64_t>(l.block) * l.inner));
    parallel_for(rows, grain, spec.threads, [&](std::size_t row_begin, std::size_t row_end) {
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
                    for (int i = 0; i < n; ++i) decode_elements<float>(t, index[i], std::span<float>(&v32[i], 1));
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
