// Property (on a machine with a GPU): the CUDA flash-attention kernels give the emulator's
// bits, every output of the forward and backward pass, for every preset the kernels run (the
// FP8 ones with mma.sync, whose sm_89/sm_90 model is exact), on random inputs and on the
// adversarial ones: sink-dominated rows, repeated maxima, scores spread over hundreds; causal
// and not; with row and key counts that are not multiples of the tiles.
// Exits 77 (CTest: skipped) where no GPU is usable (1 with ROUNDSCOPE_REQUIRE_GPU=1); a preset
// this GPU cannot run is listed with the reason; a run of no case fails.
#include <cstdio>
#include <string>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/attention_operands.hpp"
#include "gpu/flash_attention.hpp"
#include "gpu/flash_crosscheck.hpp"
#include "gpu/mma_probe.hpp"
#include "tests/gpu/gpu_or_skip.hpp"

using namespace roundscope;

int main() {
    const int cc = test::compute_capability_or_skip();
    int cases = 0, failures = 0;
    for (emu::AttentionRecipe recipe : emu::recipe_presets()) {
        if (recipe.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
        recipe.arch = gpu::model_arch(cc);
        std::string why = gpu::flash_unsupported(recipe);
        if (why.empty()) why = gpu::flash_not_runnable_here(recipe, true);
        if (!why.empty()) {
            std::printf("%s: not runnable here (%s)\n", recipe.name.c_str(), why.c_str());
            continue;
        }
        for (const auto scenario : {analysis::Scenario::random, analysis::Scenario::sink,
                                    analysis::Scenario::repeated_max, analysis::Scenario::wide}) {
            for (const bool causal : {false, true}) {
                analysis::SyntheticSpec spec;
                spec.scenario = scenario, spec.heads = 2, spec.n = 300, spec.d = 64, spec.seed = 7;
                const emu::AttentionInputs in = analysis::synthetic_attention(spec);
                const emu::AttentionShape shape = emu::attention_shape_of(in, causal, 0);
                const gpu::FlashCrosscheck c =
                    gpu::flash_crosscheck(recipe, shape, emu::attention_operands(in, *recipe.input, true), true);
                std::printf("%s, %s, %scausal: %llu of %llu outputs match (max %llu ulp)\n", recipe.name.c_str(),
                            std::string(analysis::scenario_name(scenario)).c_str(), causal ? "" : "not ",
                            static_cast<unsigned long long>(c.total.matched),
                            static_cast<unsigned long long>(c.total.total),
                            static_cast<unsigned long long>(c.total.max_ulp));
                ++cases;
                if (c.total.matched != c.total.total || c.total.total == 0) ++failures;
            }
        }
    }
    return test::verdict(cases, failures, "flash-attention cases");
}
