#include "analysis/rounding_bias.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "analysis/attention_run.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth_cache.hpp"
#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/flash_context.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

// O_lp as the backward pass reads it: the file's o, else the emulated kernel's (in the format
// the recipe forms delta from).
struct LowPrecisionO {
    std::vector<std::uint32_t> bits;
    const emu::Format* format;
    bool from_file = false;
};

LowPrecisionO o_as_read(const emu::AttentionInputs& in, const emu::AttentionRecipe& r, const emu::ForwardResult& f,
                        bool use_stored_o) {
    if (use_stored_o && in.o && r.backward.delta == emu::DeltaKind::stored_o) {
        LowPrecisionO o{std::vector<std::uint32_t>(in.o->size()), &emu::format_of(in.o->dtype()), true};
        for (std::uint64_t i = 0; i < o.bits.size(); ++i) o.bits[i] = static_cast<std::uint32_t>(in.o->bits_at(i));
        return o;
    }
    if (r.backward.delta == emu::DeltaKind::f32_o) {
        LowPrecisionO o{std::vector<std::uint32_t>(f.o_f32.size()), &emu::f32};
        std::transform(f.o_f32.begin(), f.o_f32.end(), o.bits.begin(), [](float v) { return bits_of(v); });
        return o;
    }
    return {f.o, r.output.format};
}

// delta_lp - delta_hp per row: delta_lp as the kernel forms it (float32 row sums of dO O_lp, the
// kernels' function), or rowsum(P dP) from the emulated backward pass.
std::vector<double> delta_errors(const emu::AttentionRecipe& r, const emu::AttentionShape& sh,
                                 const emu::AttentionOperands& x, const emu::ForwardResult& f, const LowPrecisionO& o,
                                 const AttentionTruth& truth, int threads, emu::RunCache* runs) {
    const std::uint64_t rows = sh.heads * sh.n_q, dv = sh.d_v;
    std::vector<double> diff(rows);
    if (r.backward.delta == emu::DeltaKind::p_dp) {
        const emu::BackwardResult bw = emu::flash_backward(r, sh, x, f, threads, runs, emu::BackwardOutputs::delta);
        for (std::uint64_t i = 0; i < rows; ++i) diff[i] = static_cast<double>(bw.delta[i]) - truth.delta[i];
        return diff;
    }
    for (std::uint64_t i = 0; i < rows; ++i)
        diff[i] = static_cast<double>(emu::recipe_delta_row(r, x.d_o.data() + i * dv, o.bits.data() + i * dv, *o.format,
                                                            static_cast<int>(dv))) -
                  truth.delta[i];
    return diff;
}

// The sum, sign count and t statistic of the rows' delta errors.
void row_statistics(const std::vector<double>& diff, BiasResult& b) {
    const auto rows = static_cast<double>(diff.size());
    b.rows = diff.size();
    b.coefficient_sum = std::accumulate(diff.begin(), diff.end(), 0.0);
    b.positive_rows =
        static_cast<std::uint64_t>(std::count_if(diff.begin(), diff.end(), [](double v) { return v > 0; }));
    const double mean = b.coefficient_sum / rows;
    double var = 0;
    for (const double v : diff) var += (v - mean) * (v - mean);
    var /= diff.size() > 1 ? rows - 1 : 1;
    b.t_statistic = var > 0 ? mean / std::sqrt(var / rows) : 0;
}

// Per feature dimension: sum_T dO[T, j] (O_lp - O_hp)[T, j] over every head and row, the `top`
// largest in magnitude.
std::vector<DimContribution> top_dimensions(const emu::AttentionShape& sh, const emu::AttentionInputs& held,
                                            const LowPrecisionO& o, const AttentionTruth& truth, int top) {
    const std::uint64_t rows = sh.heads * sh.n_q, dv = sh.d_v, keys = sh.heads * sh.n_kv;
    const std::vector<double> d_o = emu::decode_tensor<double>(*held.d_o), v = emu::decode_tensor<double>(held.v);
    std::vector<double> o_lp(o.bits.size());
    for (std::size_t i = 0; i < o_lp.size(); ++i) o_lp[i] = emu::decode(*o.format, o.bits[i]);
    std::vector<DimContribution> dims(dv);
    for (std::uint64_t j = 0; j < dv; ++j) {
        DimContribution c{j, 0, 0, 0};
        std::uint64_t negative_error = 0, negative_v = 0;
        for (std::uint64_t i = 0; i < rows; ++i) {
            const double e = o_lp[i * dv + j] - truth.o[i * dv + j];
            c.contribution += d_o[i * dv + j] * e;
            negative_error += e < 0;
        }
        for (std::uint64_t k = 0; k < keys; ++k) negative_v += v[k * dv + j] < 0;
        c.o_error_negative_fraction = static_cast<double>(negative_error) / static_cast<double>(rows);
        c.v_negative_fraction = static_cast<double>(negative_v) / static_cast<double>(keys);
        dims[j] = c;
    }
    std::sort(dims.begin(), dims.end(),
              [](const auto& p, const auto& q) { return std::fabs(p.contribution) > std::fabs(q.contribution); });
    dims.resize(std::min<std::size_t>(dims.size(), static_cast<std::size_t>(std::max(top, 0))));
    return dims;
}

HeadTies ties_of(const emu::ForwardCounts& c) {
    return HeadTies{c.tied_rows, c.tie_dominated_rows,
                    c.tied_rows > 0 ? c.tie_share_sum / static_cast<double>(c.tied_rows) : 0, c.one_key_rows};
}

}  // namespace

BiasResult rounding_bias(const emu::AttentionInputs& given, const BiasOptions& o) {
    // k and v indexed by query head (the truth cache knows the inputs by their address: kept)
    const emu::AttentionInputs expanded =
        emu::kv_group(given) > 1 ? emu::kv_per_query_head(given) : emu::AttentionInputs{};
    const emu::AttentionInputs& in = emu::kv_group(given) > 1 ? expanded : given;
    if (!in.d_o) throw Error("the delta bias needs a tensor 'do' (dO)");
    const emu::AttentionRecipe& r = o.recipe;
    const emu::AttentionShape sh = emu::attention_shape_of(in, o.causal, o.softmax_scale);
    const emu::AttentionOperands x = emu::attention_operands(in, *r.target.input, true);
    emu::ForwardOptions fo;
    fo.threads = o.threads, fo.runs = o.runs;
    const emu::ForwardResult f = emu::flash_forward(r, sh, x, fo);
    BiasResult b;
    b.recipe = r.name;
    b.p_bar_one_count = f.counts.p_bar_one;
    b.repeated_max_rows = f.counts.repeated_max_rows;
    const HeadTies all = ties_of(f.counts);
    b.tied_rows = all.tied_rows, b.tie_dominated_rows = all.tie_dominated_rows, b.tie_share_mean = all.tie_share_mean;
    b.one_key_rows = all.one_key_rows;
    for (const emu::ForwardCounts& c : f.head_counts) b.head_ties.push_back(ties_of(c));

    const LowPrecisionO o_lp = o_as_read(in, r, f, o.use_stored_o);
    b.o_from_file = o_lp.from_file;
    // delta_hp from the same inputs as the kernel holds them (the paper's O_hp): what the
    // kernel's arithmetic adds, without the rounding of float32 inputs to its input format.
    TruthOptions t;
    t.causal = o.causal, t.scale = static_cast<double>(sh.scale), t.backward = true, t.threads = o.threads;
    t.gradients = in.x.has_value();  // dQ for the query weight's error; delta alone otherwise
    t.key_gradients = false;
    const emu::AttentionInputs held = inputs_as_held(in, x, *r.target.input);
    const AttentionTruth truth = shared_truth(o.truths, in, x, *r.target.input, t);

    const std::vector<double> diff = delta_errors(r, sh, x, f, o_lp, truth, o.threads, o.runs);
    row_statistics(diff, b);
    if (in.x) b.query_weight = query_weight_error(held, diff, truth, o.threads, &in.q);
    b.top_dims = top_dimensions(sh, held, o_lp, truth, o.top);
    return b;
}

}  // namespace roundscope::analysis
