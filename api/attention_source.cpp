#include "api/attention_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <thread>

#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"
#include "lib/memory_budget.hpp"

namespace roundscope::api {

void check_alignment(const std::string& name) {
    if (name != "bottom-right" && name != "top-left")
        throw ArgumentError("causal_alignment",
                            fmt::format("'{}' is not one of bottom-right|top-left", printable(name)));
}

void validate(const ProblemChoice& problem) {
    if (problem.softmax_scale) check_in("softmax_scale", *problem.softmax_scale, ranges::softmax_scale);
    if (problem.causal_alignment) check_alignment(*problem.causal_alignment);
    if (problem.window_left) check_in("window_left", *problem.window_left, ranges::window);
    if (problem.window_right) check_in("window_right", *problem.window_right, ranges::window);
    if (problem.softcap) check_in("softcap", *problem.softcap, ranges::softcap);
    if (problem.launch_heads) check_in("launch_heads", *problem.launch_heads, ranges::launch_heads);
}

void validate(const char* command, const AttentionSource& source) {
    if (source.synthetic == source.has_file())
        throw Error(std::string(command) + ": give an input file or synthetic inputs, not both");
    if (!source.synthetic) return;
    const analysis::SyntheticSpec& s = source.spec;
    check_in("n", static_cast<std::int64_t>(std::min<std::uint64_t>(s.n, INT64_MAX)), ranges::tokens);
    check_in("d", static_cast<std::int64_t>(std::min<std::uint64_t>(s.d, INT64_MAX)), ranges::head_dim);
    check_in("heads", static_cast<std::int64_t>(std::min<std::uint64_t>(s.heads, INT64_MAX)), ranges::heads);
    if (source.scenario) analysis::parse_scenario(*source.scenario, "scenario");  // its message names the argument
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
                 fmt::format("synthetic inputs of {} head(s) of N = {}, D = {}", spec.heads, spec.n, spec.d));
}

namespace {

ChosenInputs chosen(emu::AttentionInputs in, const ProblemChoice& problem) {
    apply_problem_shape(in, problem);
    ChosenInputs c;
    c.causal = problem.causal.value_or(in.causal.value_or(false));
    c.softmax_scale = problem.softmax_scale.value_or(in.softmax_scale.value_or(0));
    c.in = std::move(in);
    return c;
}

}  // namespace

void apply_problem_shape(emu::AttentionInputs& in, const ProblemChoice& problem) {
    if (problem.causal_alignment)
        in.mask.alignment = emu::parse_alignment(*problem.causal_alignment, "causal_alignment");
    if (problem.window_left) in.mask.window_left = *problem.window_left;
    if (problem.window_right) in.mask.window_right = *problem.window_right;
    if (problem.softcap) in.softcap = *problem.softcap;
    if (problem.launch_heads) {
        const auto launch = static_cast<std::uint64_t>(*problem.launch_heads);
        if (launch < in.batch * in.heads)
            throw ArgumentError("launch_heads", fmt::format("{} is fewer than the inputs' own {} (batch x heads)",
                                                            launch, in.batch * in.heads));
        in.launch_heads = launch;
    }
}

void apply_problem(emu::AttentionInputs& in, const ProblemChoice& problem) {
    in.causal = problem.causal.value_or(in.causal.value_or(false));
    if (problem.softmax_scale) in.softmax_scale = *problem.softmax_scale;
    apply_problem_shape(in, problem);
}

ChosenInputs file_inputs(const TensorFile& file, const ProblemChoice& problem) {
    return chosen(emu::find_attention_inputs(file), problem);
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

ChosenInputs choose_inputs(const char* command, const AttentionSource& source, const ProblemChoice& problem) {
    validate(command, source);
    validate(problem);
    if (!source.synthetic) return naming_input(source, [&] { return file_inputs(source.read(), problem); });
    analysis::SyntheticSpec spec = source.spec;
    if (source.scenario) spec.scenario = analysis::parse_scenario(*source.scenario, "scenario");
    check_synthetic_memory(spec);
    return chosen(analysis::synthetic_attention(spec), problem);
}

}  // namespace roundscope::api
