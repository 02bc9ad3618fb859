// The kit's crosscheck sweep in one process: every preset the CUDA kernels run x scenario x
// causal x N x D, forward and backward, the kernel's every output bit against the emulator's,
// one JSON line per case. Built twice: against the GPU (gpu_sweep) and against the simulated
// GPU (gpu_sweep_host, the kit's dry run), from this one source.
//
//   gpu_sweep [--n 1,63,64,65,1000] [--d 64,128] [--presets NAME,...] [--scenarios NAME,...]
//             [--set KEY=VALUE]... [--forward-only] [--out FILE.jsonl] [--dump DIR] [--threads T]
// --set changes every preset swept (e.g. exp2=ex2.approx.ftz); a preset the change leaves
// inconsistent, or that no kernel then runs, is a line with runnable false and why.
// --dump writes each case's forward outputs from the kernel beside the operands it read
// (gpu/kernel_dump.hpp) as DIR/PRESET.SCENARIO.MASK.nN.dD.safetensors: the raw answers a GPU
// run brings back, for CI to check against the emulator on the CPU.
// Exit 0 when every case is bit-exact, 1 when one is not or none ran, 2 on bad arguments, 3
// without a usable GPU.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "gpu/device.hpp"
#include "gpu/flash_crosscheck.hpp"
#include "gpu/kernel_dump.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "lib/error.hpp"
#include "tools/gpu/kit_options.hpp"

using namespace roundscope;

namespace {

struct Options {
    std::vector<std::uint64_t> n{1, 63, 64, 65, 1000}, d{64, 128};
    std::set<std::string> presets;      // empty: all the kernels run
    std::vector<std::string> settings;  // --set, applied to each preset
    std::vector<analysis::Scenario> scenarios{analysis::Scenario::random, analysis::Scenario::sink,
                                              analysis::Scenario::repeated_max, analysis::Scenario::wide};
    bool backward = true;
    std::string out, dump;
    int threads = 0;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "gpu_sweep: %s\nusage: gpu_sweep [--n LIST] [--d LIST] [--presets LIST] [--scenarios LIST] "
                 "[--set KEY=VALUE]... [--forward-only] [--out FILE.jsonl] [--dump DIR] [--threads T]\n",
                 why.c_str());
    std::exit(2);
}

std::vector<std::uint64_t> sizes(const std::string& option, std::string_view list, std::uint64_t most) {
    std::vector<std::uint64_t> out;
    for (const std::string& item : kit::split(list)) {
        const auto v = kit::number(item, 1, most);
        if (!v) usage(option + ": '" + item + "' is not a size from 1 to " + std::to_string(most));
        out.push_back(*v);
    }
    return out;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--forward-only") {
            o.backward = false;
            continue;
        }
        if (i + 1 >= argc) usage("unknown or incomplete option '" + a + "'");
        const std::string value = argv[++i];
        try {
            if (a == "--n") {
                o.n = sizes(a, value, 65536);
            } else if (a == "--d") {
                o.d = sizes(a, value, 256);
            } else if (a == "--presets") {
                for (const std::string& name : kit::split(value)) o.presets.insert(emu::find_recipe(name).name);
            } else if (a == "--scenarios") {
                o.scenarios.clear();
                for (const std::string& name : kit::split(value))
                    o.scenarios.push_back(analysis::parse_scenario(name, a));
            } else if (a == "--set") {
                o.settings.push_back(kit::checked_setting(value));
            } else if (a == "--out") {
                o.out = value;
            } else if (a == "--dump") {
                o.dump = value;
            } else if (a == "--threads") {
                o.threads = static_cast<int>(sizes(a, value, 1024).front());
            } else {
                usage("unknown option '" + a + "'");
            }
        } catch (const Error& e) {
            usage(a + ": " + e.what());
        }
    }
    return o;
}

nlohmann::json comparison(const emu::BitComparison& b) {
    return {{"matched", b.matched}, {"total", b.total}, {"max_ulp", b.max_ulp}};
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const int cc = gpu::compute_capability();
    if (cc == 0) {
        std::fprintf(stderr, "gpu_sweep: no usable CUDA device\n");
        return 3;
    }
    if (!o.dump.empty()) {  // checked before any case runs
        std::error_code ec;
        std::filesystem::create_directories(o.dump, ec);
        if (!std::filesystem::is_directory(o.dump))
            usage("--dump: '" + o.dump + "' is not a folder and cannot be made");
    }
    std::ofstream file;
    if (!o.out.empty()) {
        file.open(o.out);
        if (!file) usage("--out: cannot write '" + o.out + "'");
    }
    auto emit = [&](const nlohmann::json& line) {
        (o.out.empty() ? std::cout : file) << line.dump() << "\n" << std::flush;
    };
    int cases = 0, failures = 0;
    for (emu::AttentionRecipe recipe : emu::recipe_presets()) {
        if (!o.presets.empty() && !o.presets.count(recipe.name)) continue;
        const std::string preset = recipe.name;
        try {
            kit::apply_settings(recipe, o.settings);
            emu::validate(recipe);
        } catch (const Error& e) {
            emit({{"preset", preset}, {"settings", o.settings}, {"runnable", false}, {"why", e.what()}});
            continue;
        }
        const std::string preset_instruction = recipe.target.instruction;
        recipe.target.arch = gpu::model_arch(cc);
        // the Hopper kernels where they run the preset, else the twins (wgmma as mma.sync)
        const emu::AttentionShape probe{1, 128, 128, 128, 128, false, 0.125f};
        const bool hopper = gpu::hopper_flash_unsupported(recipe, probe).empty();
        if (!hopper && recipe.target.instruction == "wgmma") emu::apply_setting(recipe, "instruction=mma.sync");
        std::string why = hopper ? std::string() : gpu::flash_unsupported(recipe);
        if (why.empty() && !hopper) why = gpu::flash_not_runnable_here(recipe, o.backward);
        // the Hopper backward where it runs the preset (BF16); the FP8 kernel's forward alone
        const bool backward_here = !hopper || gpu::hopper_flash_backward_unsupported(recipe, probe).empty();
        if (!why.empty()) {
            emit({{"preset", preset}, {"settings", o.settings}, {"runnable", false}, {"why", why}});
            continue;
        }
        for (const analysis::Scenario scenario : o.scenarios)
            for (const bool causal : {false, true})
                for (const std::uint64_t n : o.n)
                    for (const std::uint64_t d : o.d) {
                        analysis::SyntheticSpec spec;
                        spec.scenario = scenario, spec.heads = 2, spec.n = n, spec.d = d, spec.seed = 7;
                        const emu::AttentionInputs in = analysis::synthetic_attention(spec);
                        const emu::AttentionShape shape = emu::attention_shape_of(in, causal, 0);
                        const auto start = std::chrono::steady_clock::now();
                        nlohmann::json line{{"preset", preset},
                                            {"settings", o.settings},
                                            {"kernel", hopper ? "hopper" : "twins"},
                                            {"instruction", recipe.target.instruction},
                                            {"preset_instruction", preset_instruction},
                                            {"scenario", analysis::scenario_name(scenario)},
                                            {"causal", causal},
                                            {"n", n},
                                            {"d", d},
                                            {"heads", spec.heads},
                                            {"seed", spec.seed}};
                        bool exact = false;
                        try {
                            const emu::AttentionOperands operands =
                                emu::attention_operands(in, *recipe.target.input, o.backward);
                            const gpu::FlashCrosscheck c =
                                gpu::flash_crosscheck(recipe, shape, operands, o.backward && backward_here, o.threads);
                            line["device"] = c.device, line["arch"] = c.arch;
                            for (const auto& [name, b] : c.outputs) line["outputs"][name] = comparison(b);
                            for (const auto& [name, v] : c.first_values)
                                line["first_mismatch"][name] = {{"emulator", v.first}, {"gpu", v.second}};
                            exact = c.total.total > 0 && c.total.matched == c.total.total;
                            if (!o.dump.empty()) {
                                const std::string scenario_name(analysis::scenario_name(scenario));
                                const std::string name = preset + "." + scenario_name + (causal ? ".causal" : ".full") +
                                                         ".n" + std::to_string(n) + ".d" + std::to_string(d) +
                                                         ".safetensors";
                                std::string settings;
                                for (const std::string& s : o.settings) settings += (settings.empty() ? "" : ",") + s;
                                gpu::write_kernel_dump((std::filesystem::path(o.dump) / name).string(), recipe, shape,
                                                       operands, c.gpu_forward,
                                                       {{"preset", preset},
                                                        {"settings", settings},
                                                        {"arch", c.arch},
                                                        {"device", c.device},
                                                        {"kernel", c.kernel},
                                                        {"scenario", scenario_name},
                                                        {"seed", std::to_string(spec.seed)}});
                                line["dump"] = name;
                            }
                        } catch (const Error& e) {
                            line["error"] = e.what();
                        }
                        line["exact"] = exact;
                        line["seconds"] =
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                        emit(line);
                        ++cases;
                        failures += exact ? 0 : 1;
                    }
    }
    std::fprintf(stderr, "gpu_sweep: %d cases, %d not bit-exact\n", cases, failures);
    return cases > 0 && failures == 0 ? 0 : 1;
}
