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
        ->check(integer_in(1, std::int64_t{1} << 31))
        ->capture_default_str();
    synthetic_only(cmd->add_option("--d", spec.d, "Head dimension (synthetic)"))
        ->check(integer_in(2, 1024))
        ->capture_default_str();
    synthetic_only(cmd->add_option("--seed", spec.seed, "Seed (synthetic)"))
        ->check(seed_value())
        ->capture_default_str();
}

CLI::Option* InputFlags::synthetic_only(CLI::Option* option) const { return option->needs(synthetic_flag); }

void InputFlags::add_heads(CLI::App* cmd) {
    synthetic_only(cmd->add_option("--heads", spec.heads, "Heads (synthetic)"))
        ->check(integer_in(1, 4096))
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
        ->check(finite_in(0, 1e6, true));
    cmd->add_option("--causal-alignment", causal_alignment,
                    "bottom-right (FlashAttention) or top-left (PyTorch's is_causal) where Nq != Nk (default: the "
                    "file's metadata, else bottom-right)")
        ->check(CLI::IsMember({"bottom-right", "top-left"}));
    cmd->add_option("--window-left", window_left,
                    "Sliding window: keys at most this far before the diagonal (-1: unbounded; default: the file's "
                    "metadata)")
        ->check(integer_in(-1, std::int64_t{1} << 40));
    cmd->add_option("--window-right", window_right,
                    "Sliding window: keys at most this far after the diagonal (-1: unbounded; default: the file's "
                    "metadata)")
        ->check(integer_in(-1, std::int64_t{1} << 40));
    cmd->add_option("--softcap", softcap,
                    "Cap the scores at +-SOFTCAP as softcap tanh(s / softcap) (0: none; default: the file's metadata)")
        ->check(finite_in(0, 1e6, false));
    add_output_flags(cmd, json, threads);
}

void apply_mask_flags(emu::AttentionInputs& in, const AttentionFlags& flags) {
    if (!flags.causal_alignment.empty())
        in.mask.alignment = emu::parse_alignment(flags.causal_alignment, "--causal-alignment");
    if (flags.window_left != -2) in.mask.window_left = flags.window_left;
    if (flags.window_right != -2) in.mask.window_right = flags.window_right;
    if (flags.softcap >= 0) in.softcap = flags.softcap;
}

void add_output_flags(CLI::App* cmd, bool& json, int& threads) {
    cmd->add_flag("--json", json, "Print one JSON object");
    cmd->add_option("--threads", threads, "Worker threads (0: all cores)")
        ->check(thread_count())
        ->capture_default_str();
}

double synthetic_bytes(const analysis::SyntheticSpec& s) {
    const auto heads = static_cast<double>(s.heads), n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               m = static_cast<double>(s.d_model);
    // q, k, v, dO as float32, once as tensors and twice more as an analysis's operands and
    // outputs; x, W^Q and the query-weight error's [H, M, D] sums in double.
    return 3 * 4 * heads * n * d * 4 + n * m * 4 + heads * m * d * (4 + 4 * 8);
}

void check_synthetic_memory(const analysis::SyntheticSpec& spec) {
    check_memory(synthetic_bytes(spec),
                 fmt::format("--synthetic with {} head(s) of N = {}, D = {}", spec.heads, spec.n, spec.d));
}

void apply_attention_flags(emu::AttentionInputs& in, const AttentionFlags& flags) {
    in.causal = flags.causal || (!flags.no_causal && in.causal.value_or(false));
    if (flags.softmax_scale != 0) in.softmax_scale = flags.softmax_scale;
    apply_mask_flags(in, flags);
}

namespace {

ChosenInputs chosen(emu::AttentionInputs in, const AttentionFlags& flags) {
    apply_mask_flags(in, flags);
    ChosenInputs c;
    c.causal = flags.causal || (!flags.no_causal && in.causal.value_or(false));
    c.softmax_scale = flags.softmax_scale != 0 ? flags.softmax_scale : in.softmax_scale.value_or(0);
    c.in = std::move(in);
    return c;
}

}  // namespace

ChosenInputs file_inputs(const std::string& path, const AttentionFlags& flags) {
    return file_inputs(read_input(path), flags);
}

ChosenInputs file_inputs(const TensorFile& file, const AttentionFlags& flags) {
    return chosen(emu::find_attention_inputs(file), flags);
}

double attention_bytes(const emu::AttentionInputs& in, bool backward, bool truth, int threads) {
    const double heads = static_cast<double>(in.batch * in.heads), nq = static_cast<double>(in.n_q),
                 nk = static_cast<double>(in.n_kv);
    const double elements = heads * (nq * static_cast<double>(in.d + in.d_v) + nk * static_cast<double>(in.d + in.d_v));
    double bytes = elements * 16 * (backward ? 2 : 1);
    if (truth) {
        const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
        const double in_flight = std::min<double>(heads, threads > 0 ? threads : hardware);
        bytes += elements * 32 + 24 * nq * nk * in_flight;
    }
    return bytes;
}

ChosenInputs choose_inputs(const char* command, const InputFlags& input, const AttentionFlags& flags) {
    if (input.synthetic == !input.file.empty())
        throw Error(std::string(command) + ": give an input file or --synthetic, not both");
    if (!input.synthetic) return file_inputs(input.file, flags);
    analysis::SyntheticSpec spec = input.spec;
    if (!input.scenario.empty()) spec.scenario = analysis::parse_scenario(input.scenario, "--scenario");
    check_synthetic_memory(spec);
    return chosen(analysis::synthetic_attention(spec), flags);
}

}  // namespace roundscope::cli
