#pragma once
// Block quantization of whole tensors: blocks of `block` consecutive elements along one axis
// (the last, or the token axis N of a [.., N, D] tensor), optionally shifted by an offset,
// each quantized by mx_block.hpp or nvfp4_block.hpp. Blocks are independent, so the work is
// split across threads; element i of the tensor uses random stream i, so the bits do not
// depend on the thread count.
#include <optional>

#include "emu/block/block_format.hpp"
#include "emu/numbers/cast_options.hpp"
#include "lib/tensor.hpp"

namespace roundscope::emu {

struct BlockSpec {
    const BlockFormat* format = &mxfp8_e4m3;
    int block = 0;                      // elements per block; 0 = the format's default (32, NVFP4 16)
    int axis = -1;                      // the blocked axis; negative counts from the end
    int offset = 0;                     // blocks start at axis positions j * block - offset (0 <= offset < block):
                                        // the first block then holds block - offset elements
    ScaleRule rule = ScaleRule::floor;  // MX formats
    CastOptions element_options;        // rounding of the elements (saturation is always on)
    bool per_tensor_scale = true;       // NVFP4: two-level scaling (false: single-level)
    int threads = 0;
    bool scalar_reference = false;  // MX: the block-by-block reference path, not the batch one
};

struct BlockQuantized {
    Tensor elements;                        // the input's shape, in the element format
    Tensor scales;                          // the input's shape with the blocked axis cut to the number of blocks
    std::optional<float> per_tensor_scale;  // NVFP4 two-level only
};

/// Errors (naming the tensor) for a bad axis, block or offset, and, for NVFP4, a tensor
/// holding NaN or Inf (its per-tensor scale would be meaningless).
BlockQuantized block_quantize(const Tensor& t, const BlockSpec& spec);

/// The dequantized values as float32, in the input's shape, named like the elements.
Tensor block_dequantize(const BlockQuantized& q, const BlockSpec& spec);

}  // namespace roundscope::emu
