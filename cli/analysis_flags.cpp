#include "cli/analysis_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "cli/command_files.hpp"
#include "cli/option_checks.hpp"
#include "lib/error.hpp"
#include "lib/memory_budget.hpp"
#include "lib/tensor_io.hpp"

namespace roundscope::cli {

void InputFlags::add_to(CLI::App* cmd, const std::string& file_help) {
    cmd->add_option("IN", file, file_help);
    add_synthetic(cmd);
}

void InputFlags::add_synthetic(CLI::App* cmd) {
    synthetic_flag = cmd->add_flag("--synthetic", synthetic, "Synthesize the input instead of reading a file");
    // Up to 2^31 tokens: what cannot fit is refused by its memory (choose_inputs), not by a range.
    synthetic_only(cmd->add_option("--n", spec.n, "Tokens (synthetic)"))
        ->check(integer_in(api::ranges::tokens))
        ->capture_default_str();
    synthetic_only(cmd->add_option("--d", spec.d, "Head dimension (synthetic)"))
        ->check(integer_in(api::ranges::head_dim))
        ->capture_default_str();
    synthetic_only(cmd->add_option("--seed", spec.seed, "Seed (synthetic)"))
        ->check(seed_value())
        ->capture_default_str();
}

CLI::Option* InputFlags::synthetic_only(CLI::Option* option) const { return option->needs(synthetic_flag); }

void InputFlags::add_heads(CLI::App* cmd) {
    synthetic_only(cmd->add_option("--heads", spec.heads, "Heads (synthetic)"))
        ->check(integer_in(api::ranges::heads))
        ->capture_default_str();
}

void InputFlags::add_scenario(CLI::App* cmd) {
    scenario = std::string(analysis::scenario_name(spec.scenario));
    const CLI::Validator known(
        [](std::string& name) -> std::string {
            try {
                analysis::parse_scenario(name, "--scenario");
                return {};
            } catch (const Error& e) {
                const std::string m = e.what(), prefix = "--scenario: ";
                return m.starts_with(prefix) ? m.substr(prefix.size()) : m;
            }
        },
        "SCENARIO");
    synthetic_only(cmd->add_option("--scenario", scenario, "random, sink, repeated-max or wide (synthetic)"))
        ->check(known)
        ->capture_default_str();
}

void AttentionFlags::add_to(CLI::App* cmd, const std::string& scale_names) {
    auto* on = cmd->add_flag("--causal", causal, "Causal mask (default: the file's metadata, else off)");
    cmd->add_flag("--no-causal", no_causal, "No causal mask, whatever the file's metadata says")->excludes(on);
    cmd->add_option(scale_names, softmax_scale, "Softmax scale (default: the file's metadata, else 1/sqrt(D))")
        ->check(finite_in(api::ranges::softmax_scale));
    cmd->add_option("--causal-alignment", causal_alignment,
                    "bottom-right (FlashAttention) or top-left (PyTorch's is_causal) where Nq != Nk (default: the "
                    "file's metadata, else bottom-right)")
        ->check(accepted_by([](const std::string& name) { api::check_alignment(name); }, "ALIGNMENT"));
    cmd->add_option("--window-left", window_left,
                    "Sliding window: keys at most this far before the diagonal (-1: unbounded; default: the file's "
                    "metadata)")
        ->check(integer_in(api::ranges::window));
    cmd->add_option("--window-right", window_right,
                    "Sliding window: keys at most this far after the diagonal (-1: unbounded; default: the file's "
                    "metadata)")
        ->check(integer_in(api::ranges::window));
    cmd->add_option("--softcap", softcap,
                    "Cap the scores at +-SOFTCAP as softcap tanh(s / softcap) (0: none; default: the file's metadata)")
        ->check(finite_in(api::ranges::softcap));
    cmd->add_option("--launch-heads", launch_heads,
                    "B x H of the kernel launch the input is a part of (a head measured alone): PyTorch's split-KV "
                    "and split-key choices read the whole grid (default: the input is the whole launch)")
        ->check(integer_in(api::ranges::launch_heads));
    add_output_flags(cmd, json, threads);
}

api::ProblemChoice AttentionFlags::problem() const {
    api::ProblemChoice m;
    if (causal) m.causal = true;
    if (no_causal) m.causal = false;
    if (softmax_scale != 0) m.softmax_scale = softmax_scale;
    if (!causal_alignment.empty()) m.causal_alignment = causal_alignment;
    if (window_left != -2) m.window_left = window_left;
    if (window_right != -2) m.window_right = window_right;
    if (softcap >= 0) m.softcap = softcap;
    if (launch_heads > 0) m.launch_heads = launch_heads;
    return m;
}

api::AttentionSource file_source(const std::string& path) {
    api::AttentionSource s;
    s.name = path;
    s.read = [path] { return read_input(path); };
    return s;
}

api::AttentionSource InputFlags::source(const char* command) const {
    if (synthetic == !file.empty()) throw Error(std::string(command) + ": give an input file or --synthetic, not both");
    api::AttentionSource s = file.empty() ? api::AttentionSource{} : file_source(file);
    s.synthetic = synthetic;
    s.spec = spec;
    if (synthetic && !scenario.empty()) s.scenario = scenario;
    return s;
}

void apply_mask_flags(emu::AttentionInputs& in, const AttentionFlags& flags) {
    api::apply_problem_shape(in, flags.problem());
}

void add_output_flags(CLI::App* cmd, bool& json, int& threads) {
    cmd->add_flag("--json", json, "Print one JSON object");
    cmd->add_option("--threads", threads, "Worker threads (0: all cores)")
        ->check(thread_count())
        ->capture_default_str();
}

void apply_attention_flags(emu::AttentionInputs& in, const AttentionFlags& flags) {
    api::apply_problem(in, flags.problem());
}

ChosenInputs file_inputs(const std::string& path, const AttentionFlags& flags) {
    return api::file_inputs(read_input(path), flags.problem());
}

ChosenInputs file_inputs(const TensorFile& file, const AttentionFlags& flags) {
    return api::file_inputs(file, flags.problem());
}

ChosenInputs choose_inputs(const char* command, const InputFlags& input, const AttentionFlags& flags) {
    return api::choose_inputs(command, input.source(command), flags.problem());
}

}  // namespace roundscope::cli
