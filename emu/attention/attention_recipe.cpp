#include "emu/attention/attention_recipe.hpp"

#include <fmt/format.h>

#include "emu/mma/mma_model.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

void validate(const AttentionRecipe& r) {
    auto fail = [&](std::string_view key, const std::string& why) {
        throw Error(fmt::format("recipe '{}': {} ({})", r.name, why, key));
    };
    if (r.score_product == Product::model && find_mma_model(r.arch, r.instruction, *r.input, *r.input, f32) == nullptr)
        fail("input",
             fmt::format("no {} {} model multiplies {} by {}", r.arch, r.instruction, r.input->name, r.input->name));
    if (r.pv_product == Product::model && find_mma_model(r.arch, r.instruction, *r.p_format, *r.input, f32) == nullptr)
        fail("p_format", fmt::format("no {} {} model multiplies P in {} by V in {}", r.arch, r.instruction,
                                     r.p_format->name, r.input->name));
    if (r.block_m % 16 != 0 || r.block_n % 16 != 0) fail("block_m/block_n", "tiles must be multiples of 16");
    if (r.v_quant != nullptr && r.diagonal_fix && r.block_n % r.v_block != 0)
        fail("v_block",
             fmt::format("the diagonal fix needs V blocks ({}) that divide block_n ({})", r.v_block, r.block_n));
    if ((r.softmax == SoftmaxKind::naive || r.softmax == SoftmaxKind::naive_unshifted) &&
        r.kv_order == KvOrder::reverse)
        fail("kv_order", "a naive softmax has no KV order");
}

}  // namespace roundscope::emu
