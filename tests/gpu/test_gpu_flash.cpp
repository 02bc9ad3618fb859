// Property (on a machine with a GPU): the CUDA flash-attention kernels give the emulator's
// bits, every output of the forward and backward pass, for every preset the kernels run (the
// FP8 ones with mma.sync, whose sm_89/sm_90 model is exact), on random inputs and on the
// adversarial ones: sink-dominated rows, repeated maxima, scores spread over hundreds; causal
// and not; with row and key counts that are not multiples of the tiles.
// Exits 77 (CTest: skipped) where no GPU is usable.
#include <cstdio>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/attention_operands.hpp"
#include "gpu/flash_attention.hpp"
#include "gpu/flash_crosscheck.hpp"
#include "gpu/mma_probe.hpp"
#include "tests/gpu/gpu_or_skip.hpp"

using namespace roundscope;

int main() {
    const int cc = test::compute_capability_or_skip();
    int failures = 0;
    for (emu::AttentionRecipe recipe : emu::recipe_presets()) {
        if (recipe.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
        if (recipe.input->bits == 8 && cc < 89) continue;
        if (!gpu::flash_unsupported(recipe).empty()) {
            std::printf("%s: not run by the kernels (%s)\n", recipe.name.c_str(),
                        gpu::flash_unsupported(recipe).c_str());
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
                std::printf(
                    "%s, scenario %d, %scausal: %llu of %llu outputs match (max %llu ulp)\n", recipe.name.c_str(),
                    static_cast<int>(scenario), causal ? "" : "not ", static_cast<unsigned long long>(c.total.matched),
                    static_cast<unsigned long long>(c.total.total), static_cast<unsigned long long>(c.total.max_ulp));
                if (c.total.matched != c.total.total) ++failures;
            }
        }
    }
    std::printf("%d failing case(s)\n", failures);
    return failures == 0 ? 0 : 1;
}
