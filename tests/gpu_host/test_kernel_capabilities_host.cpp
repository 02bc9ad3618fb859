// Property: each kernel runs bit for bit what its row of the capability table
// (emu/attention/recipe/kernel_capabilities.cpp) says it runs, and refuses the rest with the table's
// reason: the capability walk (capability_walk.hpp) over every value of every recipe key, on
// the CUDA twins and the Hopper kernels (BF16, FP8) compiled for the simulated GPU. The walk can fail: a
// kernel that ignores a key it claims to run (here the emulator with grad_product forced back
// to the tensor-core model) is caught on the problem below. What the problem cannot show (a
// setting whose bits equal the base recipe's) is listed, so that it is a decision, not a gap.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "analysis/synthetic_attention.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "gpu/kernels/hopper_fp8_flash.hpp"
#include "tests/gpu_host/capability_walk.hpp"

using namespace roundscope;

namespace {

emu::AttentionInputs problem(std::uint64_t n, std::uint64_t d) {
    analysis::SyntheticSpec spec;
    spec.scenario = analysis::Scenario::sink, spec.heads = 1, spec.n = n, spec.d = d, spec.seed = 5;
    return analysis::synthetic_attention(spec);
}

// A softmax scale whose product with log2(e) rounds differently in float32 and in double (0.1
// does not), so that scale_log2 shows.
constexpr double scale = 0.102;

emu::AttentionRecipe recipe(const char* preset, std::initializer_list<const char*> settings) {
    emu::AttentionRecipe r = emu::find_recipe(preset);
    for (const char* s : settings) emu::apply_setting(r, s);
    return r;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    return out;
}

test::WalkedKernel twins() {
    return {&emu::kernel_named("twins"),
            [](const emu::AttentionRecipe& r, const emu::AttentionShape& s, const emu::AttentionOperands& in) {
                gpu::simt::set_simulated_architecture(r.target.arch);
                return gpu::flash_forward(r, s, in);
            },
            [](const emu::AttentionRecipe& r, const emu::AttentionShape& s, const emu::AttentionOperands& in,
               const emu::ForwardResult& f) {
                gpu::simt::set_simulated_architecture(r.target.arch);
                return gpu::flash_backward(r, s, in, f);
            }};
}

}  // namespace

// The two walks take most of a minute on the simulated GPU: [.][slow], the full suite
// (test_gpu_host_slow), not the fast loop; the cases that catch a wrong table stay in it.
TEST_CASE("capability walk: the CUDA twins run what their row says, bit for bit", "[.][slow][gpu-host][capabilities]") {
    const emu::AttentionInputs inputs = problem(40, 32);
    const emu::AttentionShape shape = emu::attention_shape_of(inputs, true, scale);
    // BF16 with O and the gradients written in float32 (no final rounding hides a difference),
    // and FP8 with a quantized V (P's scale, the max adjustment and V's blocks show there).
    const test::WalkResult bf16 = test::walk(
        twins(), recipe("fa2-bf16", {"block_m=32", "block_n=32", "o_format=f32", "grad_format=f32"}), shape, inputs);
    const test::WalkResult fp8 =
        test::walk(twins(),
                   recipe("fa3-fp8", {"instruction=mma.sync", "block_m=32", "block_n=32", "v_quant=mxfp8_e4m3",
                                      "max_adjust=on", "grad_format=f32"}),
                   shape, inputs);
    for (const test::WalkResult* w : {&bf16, &fp8}) {
        INFO(joined(w->failures));
        CHECK(w->failures.empty());
        CHECK(w->ran > 0);
        CHECK(w->refused > 0);
    }
    // What no problem shows, and why that is no gap.
    const std::map<std::string, std::string> by_design{
        {"block_m", "rows are independent: the row tile schedules, it does not round"},
        {"softmax_format", "the online softmax does not read it (naive and online-torch do)"},
        {"grad_seed", "read by stochastic rounding alone, which the twins refuse (grad_quant none)"},
        {"arch=sm100", "sm100's mma.sync model for 16-bit inputs is sm90's (emu/mma/mma_model.cpp)"},
    };
    CHECK(joined(test::unshown_in_all({&bf16, &fp8}, by_design)) == "");
    gpu::simt::set_simulated_architecture("sm90");
}

TEST_CASE("capability walk: the Hopper kernels run what their row says, bit for bit, forward and backward",
          "[.][slow][gpu-host][capabilities]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionInputs inputs = problem(130, 64);
    const emu::AttentionShape shape = emu::attention_shape_of(inputs, true, scale);
    const test::WalkedKernel hopper{&emu::kernel_named("hopper"), gpu::hopper_flash_forward,
                                    gpu::hopper_flash_backward};
    const test::WalkResult w = test::walk(hopper, emu::find_recipe("h100-bf16"), shape, inputs);
    INFO(joined(w.failures));
    CHECK(w.failures.empty());
    CHECK(w.ran > 0);
    CHECK(w.refused > 0);
    const std::map<std::string, std::string> by_design{
        {"softmax_format", "the online softmax does not read it"},
        {"diagonal_fix", "read with v_quant alone, which the kernel refuses"},
        {"max_adjust_beta", "read with max_adjust=on alone, which the kernel refuses"},
        {"p_scale=256", "a power-of-two scale of a BF16 P is exact on this problem; p_scale=448 shows the key"},
        {"v_block", "read with v_quant alone, which the kernel refuses"},
        {"grad_seed", "read by stochastic rounding alone, which the backward refuses (grad_quant none)"},
    };
    CHECK(joined(test::unshown_in_all({&w}, by_design)) == "");
}

TEST_CASE("capability walk: the FP8 Hopper kernel runs what its row says, bit for bit",
          "[.][slow][gpu-host][capabilities]") {
    gpu::simt::set_simulated_architecture("sm90");
    const emu::AttentionInputs inputs = problem(200, 64);  // two KV tiles of 160
    const emu::AttentionShape shape = emu::attention_shape_of(inputs, true, scale);
    // the FP8 kernel alone (hopper_flash_forward would send a BF16 input to the BF16 kernel)
    const test::WalkedKernel hopper_fp8{&emu::kernel_named("hopper-fp8"), gpu::hopper_fp8_flash_forward, {}};
    const test::WalkResult w = test::walk(hopper_fp8, emu::find_recipe("h100-fp8"), shape, inputs);
    INFO(joined(w.failures));
    CHECK(w.failures.empty());
    CHECK(w.ran > 0);
    CHECK(w.refused > 0);
    const std::map<std::string, std::string> by_design{
        {"softmax_format", "the online softmax does not read it"},
        {"diagonal_fix", "read with v_quant alone, which the kernel refuses"},
        {"max_adjust_beta", "read with max_adjust=on alone, which the kernel refuses"},
        {"v_block", "read with v_quant alone, which the kernel refuses"},
    };
    CHECK(joined(test::unshown_in_all({&w}, by_design)) == "");
}

TEST_CASE("capability walk: a kernel that ignores a key it claims is caught", "[gpu-host][capabilities]") {
    const emu::AttentionInputs inputs = problem(40, 32);
    const emu::AttentionShape shape = emu::attention_shape_of(inputs, true, scale);
    // Claims every key (the emulator's row) but runs grad_product=f64 as the tensor-core model.
    const test::WalkedKernel ignoring{&emu::kernel_named("emulator"),
                                      [](const emu::AttentionRecipe& r, const emu::AttentionShape& s,
                                         const emu::AttentionOperands& in) { return emu::flash_forward(r, s, in, 1); },
                                      [](emu::AttentionRecipe r, const emu::AttentionShape& s,
                                         const emu::AttentionOperands& in, const emu::ForwardResult& f) {
                                          r.backward.product = emu::Product::model;
                                          return emu::flash_backward(r, s, in, f, 1);
                                      }};
    const test::WalkResult w = test::walk(
        ignoring, recipe("fa2-bf16", {"block_m=32", "block_n=32", "o_format=f32", "grad_format=f32"}), shape, inputs);
    REQUIRE(w.failures.size() == 1);
    CHECK(w.failures[0].starts_with("grad_product=f64: d"));
}

TEST_CASE("capability walk: a refusal the table does not declare, and a run it refuses, are caught",
          "[gpu-host][capabilities]") {
    const emu::AttentionInputs inputs = problem(40, 32);
    const emu::AttentionShape shape = emu::attention_shape_of(inputs, true, scale);
    const emu::AttentionRecipe base = recipe("fa2-bf16", {"block_m=32", "block_n=32"});
    // The emulator under the twins' row: it runs what the row refuses.
    const test::WalkedKernel runs_all{
        &emu::kernel_named("twins"),
        [](const emu::AttentionRecipe& r, const emu::AttentionShape& s, const emu::AttentionOperands& in) {
            return emu::flash_forward(r, s, in, 1);
        },
        [](const emu::AttentionRecipe& r, const emu::AttentionShape& s, const emu::AttentionOperands& in,
           const emu::ForwardResult& f) { return emu::flash_backward(r, s, in, f, 1); }};
    const test::WalkResult w = test::walk(runs_all, base, shape, inputs);
    REQUIRE(w.refused > 0);
    CHECK(w.failures.size() == static_cast<std::size_t>(w.refused));
    CHECK(w.failures[0].find(": ran, but the table says: ") != std::string::npos);
    // The emulator's row, with a kernel that refuses kv_order=reverse on its own.
    const test::WalkedKernel refuses{
        &emu::kernel_named("emulator"),
        [](const emu::AttentionRecipe& r, const emu::AttentionShape& s, const emu::AttentionOperands& in) {
            if (r.tiles.kv_order == emu::KvOrder::reverse) throw Error("no reverse order here");
            return emu::flash_forward(r, s, in, 1);
        },
        {}};
    const test::WalkResult v = test::walk(refuses, base, shape, inputs);
    REQUIRE(v.failures.size() == 1);
    CHECK(v.failures[0] == "kv_order=reverse: the table runs it, the kernel refused: no reverse order here");
}
