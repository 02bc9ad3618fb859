// `roundscope crosscheck --recipe NAME [--set KEY=VALUE]... (IN | --synthetic [--scenario S]
// [--n N] [--d D] [--heads H] [--seed S]) [--backward] [--causal] [--dump FILE] [--json]`: the
// CUDA kernel and the emulator on the same input, every output bit compared
// (gpu/flash_crosscheck.hpp); --dump keeps the kernel's raw forward outputs beside the operands
// it read, a dump `compare` reads (gpu/kernel_dump.hpp). Exit 1 on any mismatch, 3 without a GPU.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/synthetic_attention.hpp"
#include "cli/analysis_flags.hpp"
#include "cli/cli_output.hpp"
#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/recipe_flags.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"
#if ROUNDSCOPE_WITH_GPU
#include "gpu/flash_crosscheck.hpp"
#include "gpu/kernel_dump.hpp"
#endif

namespace roundscope::cli {
namespace {

struct CrosscheckArgs {
    InputFlags input;
    AttentionFlags flags;
    RecipeFlags recipe;
    bool backward = false;
    std::string dump;  // --dump FILE

    CrosscheckArgs() { input.spec.heads = 2; }
};

void run(const CrosscheckArgs& a) {
    const emu::AttentionRecipe recipe = a.recipe.recipe();
    if (!a.dump.empty())
        check_output("--dump", a.dump,
                     a.input.file.empty() ? std::vector<std::string>{} : std::vector<std::string>{a.input.file});
    const ChosenInputs chosen = choose_inputs("crosscheck", a.input, a.flags);
    const emu::AttentionInputs& in = chosen.in;
    const emu::AttentionShape shape = emu::attention_shape_of(in, chosen.causal, chosen.softmax_scale);
    const emu::AttentionOperands operands =
        naming_input(a.input.file, [&] { return emu::attention_operands(in, *recipe.target.input, a.backward); });
#if ROUNDSCOPE_WITH_GPU
    const gpu::FlashCrosscheck c = [&] {
        try {
            return gpu::flash_crosscheck(recipe, shape, operands, a.backward, a.flags.threads);
        } catch (const Error& e) {
            if (std::string(e.what()).find("no CUDA GPU") == std::string::npos) throw;
            std::fprintf(stderr, "roundscope: error: %s\n", e.what());
            throw ExitCode{3};
        }
    }();
    if (!a.dump.empty())  // kept whatever the comparison found: a mismatch is when it is wanted
        gpu::write_kernel_dump(a.dump, recipe, shape, operands, c.gpu_forward,
                               {{"arch", c.arch}, {"device", c.device}, {"kernel", c.kernel}});
    if (a.flags.json) {
        nlohmann::json outputs = nlohmann::json::object();
        for (const auto& [name, b] : c.outputs) {
            outputs[name] = {{"matched", b.matched}, {"total", b.total}, {"max_ulp", b.max_ulp}};
            if (b.first_mismatch) {
                outputs[name]["first_mismatch"] = {{"index", *b.first_mismatch},
                                                   {"emulator", json_number(c.first_values.at(name).first)},
                                                   {"gpu", json_number(c.first_values.at(name).second)}};
            }
        }
        print_json(nlohmann::json{{"recipe", recipe.name},
                                  {"device", c.device},
                                  {"arch", c.arch},
                                  {"kernel", c.kernel},
                                  {"matched", c.total.matched},
                                  {"total", c.total.total},
                                  {"max_ulp", c.total.max_ulp},
                                  {"outputs", outputs}});
    } else {
        fmt::print("crosscheck {} on {} (model {}): {} of {} output bits patterns match\n", recipe.name, c.device,
                   c.arch, c.total.matched, c.total.total);
        for (const auto& [name, b] : c.outputs) {
            fmt::print("  {:6} {}/{} max {} ulp", name, b.matched, b.total, b.max_ulp);
            if (b.first_mismatch)
                fmt::print("; first at element {}: emulator {} GPU {}", *b.first_mismatch,
                           format_double(c.first_values.at(name).first), format_double(c.first_values.at(name).second));
            fmt::print("\n");
        }
    }
    if (c.total.matched != c.total.total) throw ExitCode{1};
#else
    (void)shape, (void)operands;
    std::fprintf(
        stderr,
        "roundscope: error: crosscheck: this roundscope was built without CUDA (ROUNDSCOPE_CUDA=OFF or no nvcc)\n");
    throw ExitCode{3};
#endif
}

}  // namespace

void add_crosscheck_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("crosscheck",
                                   "The CUDA kernel and the emulator on the same input, bit for bit (needs a GPU)");
    auto a = std::make_shared<CrosscheckArgs>();
    a->input.add_to(cmd, "File with q, k, v (and do)");
    a->input.add_heads(cmd);
    a->input.add_scenario(cmd);
    a->recipe.add_to(cmd);
    cmd->add_flag("--backward", a->backward, "Also compare the backward pass");
    cmd->add_option("--dump", a->dump,
                    "Write the kernel's forward outputs (o, lse) beside the operands it read (q, k, v) to this "
                    ".safetensors file, a dump `compare` reads");
    a->flags.add_to(cmd);
    cmd->footer("Example: roundscope crosscheck --recipe fa2-bf16 --synthetic --scenario sink --backward\n");
    cmd->callback([a] { run(*a); });
}

}  // namespace roundscope::cli
