#pragma once
// The frame PyTorch's math SDPA shares on every device (attention.cpp's
// _scaled_dot_product_attention_math): q and k upcast and scaled (math_path_operands.hpp), v
// upcast; S = q k^T and O = P V by the recipe's float32 products over the whole row; a mask added
// in float32; P = 0 for a row with no key (_safe_softmax); O cast once. What differs by device is
// the row's softmax and the logf of the recipe's LSE (the math path writes none): the GPU's in
// cuda_math_forward.hpp, the CPU's in aten_cpu_math_forward.hpp. Internal to emu/attention/flash.
#include <cstdint>
#include <vector>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"

namespace roundscope::emu::detail {

/// What a device's math path does to one row: its softmax (x the row's n scores, masked ones -inf;
/// P into p, the max and the sum into m and l; false for a row of -inf only) and its logf.
struct MathPathRow {
    bool (*softmax)(const std::vector<float>& x, std::uint64_t n, std::vector<float>& p, float& m, float& l);
    float (*logf)(float);
};

/// The rows `rows` of head `head` (q: that head's [n_q][d], k and v: its KV head's, input bits)
/// into `out`: O, o_f32, the LSE RN(m + logf(l)) and the rows' counts (keys below skip_keys
/// uncounted, as ForwardOptions::uncounted_keys).
void math_path_rows(const FlashContext& ctx, const MathPathRow& row_rule, const std::uint32_t* q,
                    const std::uint32_t* k, const std::uint32_t* v, std::uint64_t head, Span rows, ForwardResult& out,
                    std::uint64_t skip_keys);

}  // namespace roundscope::emu::detail
