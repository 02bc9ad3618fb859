// Property (on a machine with a GPU): the CUDA flash-attention kernels give the emulator's
// bits, every output of the forward and backward pass, for every preset the kernels run (the
// FP8 ones with mma.sync, whose sm_89/sm_90 model is exact; h100-bf16 on an sm_90 GPU with the
// Hopper kernels, forward (O, O in float32, the LSE) and backward (dQ, dK, dV, delta)), on random inputs and on the
// adversarial ones: sink-dominated rows, repeated maxima, scores spread over hundreds; causal
// and not; with row and key counts that are not multiples of the tiles.
// Exits 77 (CTest: skipped) where no GPU is usable (1 with ROUNDSCOPE_REQUIRE_GPU=1); a preset
// this GPU cannot run is listed with the reason; a run of no case fails.
//   test_gpu_flash [--n 1,63,64,65,300] [--d 64,128] [--presets NAME,...]   (bad arguments: exit 2)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "gpu/flash_crosscheck.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "lib/error.hpp"
#include "tests/gpu/gpu_or_skip.hpp"
#include "tools/gpu/kit_options.hpp"

using namespace roundscope;

namespace {

struct Sweep {
    std::vector<std::uint64_t> n{1, 63, 64, 65, 300};
    std::vector<std::uint64_t> d{64, 128};
    std::set<std::string> presets;  // empty: every preset the kernels run
};

std::vector<std::uint64_t> sizes(const char* option, std::string_view list) {
    std::vector<std::uint64_t> out;
    for (const std::string& item : kit::split(list)) {
        const auto v = kit::number(item, 1, 65536);
        if (!v) {
            std::fprintf(stderr, "test_gpu_flash: %s: '%s' is not a size from 1 to 65536\n", option, item.c_str());
            std::exit(2);
        }
        out.push_back(*v);
    }
    return out;
}

Sweep parse(int argc, char** argv) {
    Sweep s;
    for (int i = 1; i < argc; i += 2) {
        const std::string_view option = argv[i];
        if (i + 1 >= argc || (option != "--n" && option != "--d" && option != "--presets")) {
            std::fprintf(stderr, "usage: test_gpu_flash [--n 1,63,64,65,300] [--d 64,128] [--presets NAME,...]\n");
            std::exit(2);
        }
        if (option == "--n") s.n = sizes("--n", argv[i + 1]);
        if (option == "--d") s.d = sizes("--d", argv[i + 1]);
        if (option == "--presets")
            for (const std::string& name : kit::split(argv[i + 1])) s.presets.insert(emu::find_recipe(name).name);
    }
    return s;
}

struct Case {
    bool causal;
    std::uint64_t n, d;
};

std::vector<Case> cases_of(const Sweep& s) {
    std::vector<Case> out;
    for (const bool causal : {false, true})
        for (const std::uint64_t n : s.n)
            for (const std::uint64_t d : s.d) out.push_back({causal, n, d});
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    Sweep sweep;
    try {
        sweep = parse(argc, argv);
    } catch (const Error& e) {
        std::fprintf(stderr, "test_gpu_flash: --presets: %s\n", e.what());
        return 2;
    }
    const int cc = test::compute_capability_or_skip();
    int cases = 0, failures = 0;
    for (emu::AttentionRecipe recipe : emu::recipe_presets()) {
        if (!sweep.presets.empty() && !sweep.presets.count(recipe.name)) continue;
        recipe.target.arch = gpu::model_arch(cc);
        // the Hopper kernels where they run the preset (the backward too where it runs it), else the
        // twins (wgmma as mma.sync)
        const emu::AttentionShape probe{1, 128, 128, 128, 128, false, 0.125f};
        const bool hopper = gpu::hopper_flash_unsupported(recipe, probe).empty();
        if (!hopper && recipe.target.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
        std::string why = hopper ? std::string() : gpu::flash_unsupported(recipe);
        if (why.empty() && !hopper) why = gpu::flash_not_runnable_here(recipe, true);
        if (!why.empty()) {
            std::printf("%s: not runnable here (%s)\n", recipe.name.c_str(), why.c_str());
            continue;
        }
        for (const auto scenario : {analysis::Scenario::random, analysis::Scenario::sink,
                                    analysis::Scenario::repeated_max, analysis::Scenario::wide}) {
            for (const auto [causal, n, d] : cases_of(sweep)) {
                analysis::SyntheticSpec spec;
                spec.scenario = scenario, spec.heads = 2, spec.n = n, spec.d = d, spec.seed = 7;
                const emu::AttentionInputs in = analysis::synthetic_attention(spec);
                const emu::AttentionShape shape = emu::attention_shape_of(in, causal, 0);
                const gpu::FlashCrosscheck c =
                    gpu::flash_crosscheck(recipe, shape, emu::attention_operands(in, *recipe.target.input, true),
                                          !hopper || gpu::hopper_flash_backward_unsupported(recipe, probe).empty());
                std::printf(
                    "%s (%s), %s, %scausal, N %llu, D %llu: %llu of %llu outputs match (max %llu ulp)\n",
                    recipe.name.c_str(), c.kernel.c_str(), std::string(analysis::scenario_name(scenario)).c_str(),
                    causal ? "" : "not ", static_cast<unsigned long long>(n), static_cast<unsigned long long>(d),
                    static_cast<unsigned long long>(c.total.matched), static_cast<unsigned long long>(c.total.total),
                    static_cast<unsigned long long>(c.total.max_ulp));
                ++cases;
                if (c.total.matched != c.total.total || c.total.total == 0) ++failures;
            }
        }
    }
    return test::verdict(cases, failures, "flash-attention cases");
}
