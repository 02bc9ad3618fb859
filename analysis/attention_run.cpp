#include "analysis/attention_run.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "analysis/truth/attention_truth.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

std::vector<double> widened(const std::vector<float>& x) { return {x.begin(), x.end()}; }

}  // namespace

std::vector<double> decoded(const std::vector<std::uint32_t>& bits, const emu::Format& f) {
    std::vector<double> x(bits.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = emu::decode(f, bits[i]);
    return x;
}

emu::AttentionInputs inputs_as_held(const emu::AttentionInputs& in, const emu::AttentionOperands& x,
                                    const emu::Format& f) {
    emu::AttentionInputs r = in;
    r.q = Tensor::of_bits("q", emu::dtype_of(f), in.q.shape(), x.q);
    r.k = Tensor::of_bits("k", emu::dtype_of(f), in.k.shape(), x.k);
    r.v = Tensor::of_bits("v", emu::dtype_of(f), in.v.shape(), x.v);
    if (in.d_o && !x.d_o.empty()) r.d_o = Tensor::of_bits("do", emu::dtype_of(f), in.d_o->shape(), x.d_o);
    return r;
}

ErrorSums error_sums(const std::vector<double>& x, const std::vector<double>& truth) {
    ErrorSums s;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isinf(truth[i]) && x[i] == truth[i]) continue;  // an empty row's LSE: -inf both ways
        const double e = x[i] - truth[i];
        s.max_abs = std::max(s.max_abs, std::fabs(e));
        if (std::isnan(e)) s.max_abs = e;
        s.squared += e * e, s.norm += truth[i] * truth[i];
        ++s.finite;
    }
    return s;
}

ErrorStats error_stats_of(const ErrorSums& s) {
    ErrorStats e;
    e.max_abs = s.max_abs;
    if (s.finite > 0) e.rms = std::sqrt(s.squared / static_cast<double>(s.finite));
    e.rel_rms =
        s.norm > 0 ? std::sqrt(s.squared / s.norm) : (s.squared > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    return e;
}

ErrorStats error_stats(const std::vector<double>& x, const std::vector<double>& truth) {
    return error_stats_of(error_sums(x, truth));
}

AttentionRun run_attention(const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe,
                           const AttentionRunOptions& options) {
    AttentionRun run{.recipe = recipe, .shape = emu::attention_shape_of(in, options.causal, options.scale)};
    const emu::AttentionOperands operands = emu::attention_operands(in, *recipe.target.input, options.backward);
    emu::ForwardOptions fo;
    fo.threads = options.threads, fo.runs = options.runs;
    run.forward = emu::flash_forward(recipe, run.shape, operands, fo);
    if (options.backward)
        run.backward =
            emu::flash_backward(recipe, run.shape, operands, run.forward, options.threads, options.runs,
                                options.key_gradients ? emu::BackwardOutputs::all : emu::BackwardOutputs::dq);
    if (!options.truth) return run;

    TruthOptions t;
    t.causal = options.causal;
    t.scale = static_cast<double>(run.shape.scale);  // the float32 scale the kernel used
    t.backward = options.backward;
    t.key_gradients = options.key_gradients;
    t.threads = options.threads;
    const AttentionTruth* known = options.known_truth;
    const bool usable = known != nullptr && known->causal == t.causal &&
                        std::bit_cast<std::uint64_t>(known->scale) == std::bit_cast<std::uint64_t>(t.scale) &&
                        known->o.size() == run.forward.o.size() && (!t.backward || !known->dq.empty()) &&
                        (!t.backward || !t.key_gradients || !known->dk.empty());
    const AttentionTruth& truth = run.truth.emplace(usable ? *known : attention_truth(in, t));
    run.errors["o"] = error_stats(decoded(run.forward.o, *recipe.output.format), truth.o);
    run.errors["lse"] = error_stats(widened(run.forward.lse), truth.lse);
    if (run.backward) {
        const emu::BackwardResult& b = *run.backward;
        run.errors["delta"] = error_stats(widened(b.delta), truth.delta);
        run.errors["dq"] = error_stats(decoded(b.dq, *recipe.backward.grad_format), truth.dq);
        if (!truth.dk.empty()) {  // not asked for (key_gradients): no error of dK and dV
            run.errors["dk"] = error_stats(decoded(b.dk, *recipe.backward.grad_format), truth.dk);
            run.errors["dv"] = error_stats(decoded(b.dv, *recipe.backward.grad_format), truth.dv);
        }
    }
    return run;
}

}  // namespace roundscope::analysis
