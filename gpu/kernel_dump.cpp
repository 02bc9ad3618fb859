#include "gpu/kernel_dump.hpp"

#include <fmt/format.h>

#include <vector>

#include "emu/batch/format_dtype.hpp"
#include "lib/error.hpp"
#include "lib/safetensors.hpp"

namespace roundscope::gpu {
namespace {

Tensor bits_tensor(const char* name, const emu::Format& f, Shape shape, const std::vector<std::uint32_t>& bits) {
    const std::uint64_t n = *element_count(shape);
    if (bits.size() != n)
        throw Error(fmt::format("kernel dump: {} has {} values, not {}", name, bits.size(), shape_string(shape)));
    return Tensor::of_bits(name, emu::dtype_of(f), std::move(shape), bits);
}

}  // namespace

void write_kernel_dump(const std::string& path, const emu::AttentionRecipe& recipe, const emu::AttentionShape& sh,
                       const emu::AttentionOperands& in, const emu::ForwardResult& out,
                       const std::map<std::string, std::string>& provenance) {
    // What the metadata keys "causal" and "softmax_scale" cannot say is refused, never dropped.
    if ((sh.mask && !sh.mask->prefix_only()) || sh.kv_group != 1 || sh.query_rows || sh.softcap != 0)
        throw Error(
            "kernel dump: only causal or full attention over every row, one key-value head a query "
            "head, is written (no mask, window, grouped heads, row sample or soft cap)");
    const std::uint64_t h = sh.heads;
    std::vector<Tensor> tensors{
        bits_tensor("q", *recipe.target.input, {h, sh.n_q, sh.d}, in.q),
        bits_tensor("k", *recipe.target.input, {h, sh.n_kv, sh.d}, in.k),
        bits_tensor("v", *recipe.target.input, {h, sh.n_kv, sh.d_v}, in.v),
        bits_tensor("o", *recipe.output.format, {h, sh.n_q, sh.d_v}, out.o),
    };
    if (out.lse.size() != h * sh.n_q)
        throw Error(fmt::format("kernel dump: lse has {} values, not {} x {}", out.lse.size(), h, sh.n_q));
    tensors.push_back(Tensor::of_bits("lse", DType::f32, {h, sh.n_q}, out.lse));
    std::map<std::string, std::string> metadata{
        {"causal", sh.causal ? "true" : "false"},
        // the scale the kernel was given, shortest round-trip digits: read back, the same double
        {"softmax_scale", fmt::format("{}", sh.scale_given != 0 ? sh.scale_given : double(sh.scale))},
        {"roundscope.recipe", recipe.name},
    };
    for (const auto& [key, value] : provenance) metadata["roundscope." + key] = value;
    write_safetensors(path, tensors, metadata);
}

}  // namespace roundscope::gpu
