#include "analysis/kernel_compare.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "emu/attention/flash/attention_operands.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/batch/format_dtype.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/bit_compare.hpp"
#include "emu/numbers/round.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

constexpr std::uint64_t no_distance = std::numeric_limits<std::uint64_t>::max();

/// An output the kernel wrote, for one head, with what the emulation and the truth give in its
/// place: the head's elements start at `first` in the file's tensor.
struct OutputSides {
    const Tensor* kernel;
    std::uint64_t first;
    const emu::Format* format;
    std::vector<std::uint32_t> emulated;
    const std::vector<double>* truth;
    // A sample of the head's rows (emu::AttentionInputs::query_rows), each `row_width` elements:
    // element i is the head's row (*rows)[i / row_width]. Null: the head's elements in order.
    const std::vector<std::uint64_t>* rows = nullptr;
    std::uint64_t row_width = 1;
    // The elements of one row of the output (o, dq, dk, dv: the head dimension; lse: 1), whose
    // largest |recipe| sets the scale of max_row_ulp.
    std::uint64_t scale_width = 1;
    std::uint64_t element(std::uint64_t i) const {
        return first + (rows == nullptr ? i : (*rows)[i / row_width] * row_width + i % row_width);
    }
};

// How far an element is from the truth, for ordering the worst: NaN furthest, an empty row's
// LSE (-inf both ways) not at all.
double distance(double kernel, double truth) {
    if (std::isinf(truth) && kernel == truth) return 0.0;
    const double e = std::fabs(kernel - truth);
    return std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
}

/// The spacing of f's values at |x|: 2^(e - man_bits) for |x| in [2^e, 2^(e+1)), and the
/// subnormal spacing at and below the smallest normal (and at 0).
double ulp_at(const emu::Format& f, double x) {
    const int min_exp = 1 - f.bias;
    const int e = x == 0 || !std::isfinite(x) ? min_exp : std::max(std::ilogb(x), min_exp);
    return std::ldexp(1.0, e - f.man_bits);
}

bool opposite_signs(double a, double b) { return (a > 0 && b < 0) || (a < 0 && b > 0); }

bool within(double kernel, double expected, const Tolerance& t) {
    if (std::isnan(kernel) || std::isnan(expected)) return std::isnan(kernel) && std::isnan(expected);
    if (kernel == expected) return true;  // equal infinities too
    return std::fabs(kernel - expected) <= t.atol + t.rtol * std::fabs(expected);
}

/// The statistics against the recipe a kernel's CI reads (OutputComparison's second part).
void add_ci_statistics(OutputComparison& c, const OutputSides& s, const std::vector<std::uint32_t>& kernel,
                       const std::vector<double>& values, const CompareChoice& choice) {
    const emu::Format& f = *s.format;
    const std::vector<double>& truth = *s.truth;
    const std::uint64_t n = truth.size(), width = s.scale_width;
    if (choice.tolerance) c.outside_tolerance = 0;
    std::uint64_t largest = 0;
    for (std::uint64_t row = 0; row * width < n; ++row) {
        const std::uint64_t begin = row * width, end = std::min(n, begin + width);
        double scale = 0;
        for (std::uint64_t i = begin; i < end; ++i)
            if (const double r = emu::decode(f, s.emulated[i]); std::isfinite(r)) scale = std::max(scale, std::fabs(r));
        const double unit = ulp_at(f, scale);
        for (std::uint64_t i = begin; i < end; ++i) {
            const double k = values[i], r = emu::decode(f, s.emulated[i]);
            auto element = [&](std::uint64_t ulp) {
                return ElementDifference{unravel(s.element(i), s.kernel->shape()), k, r, truth[i], ulp};
            };
            const std::uint64_t ulp = emu::ulp_distance(f, s.emulated[i], kernel[i]);
            if (ulp > largest) largest = ulp, c.largest_difference = element(ulp);
            if (!std::isfinite(k) && std::isfinite(truth[i]) && c.nonfinite++ == 0) c.first_nonfinite = element(ulp);
            if (std::isfinite(k) && std::isfinite(r)) {
                c.max_row_ulp = std::max(c.max_row_ulp, std::fabs(k - r) / unit);
                if (opposite_signs(k, r) && std::fabs(r) < unit) ++c.sign_flips_near_zero;
            } else if (ulp > 0) {  // a NaN or an infinity on one side, or unequal: no finite distance
                c.max_row_ulp = std::numeric_limits<double>::infinity();
            }
            if (choice.tolerance && !within(k, r, *choice.tolerance)) ++*c.outside_tolerance;
        }
    }
}

/// The bucket label of a distance in ulps ("0", "1", "2-3", ..., "nan").
std::string ulp_bucket_label(std::uint64_t ulp) {
    if (ulp == no_distance) return "nan";
    if (ulp <= 1) return std::to_string(ulp);
    const int w = std::bit_width(ulp);  // [2^(w-1), 2^w)
    return std::to_string(std::uint64_t{1} << (w - 1)) + "-" + std::to_string((std::uint64_t{1} << (w - 1)) * 2 - 1);
}

UlpHistogram histogram_of(const std::vector<std::uint64_t>& counts) {
    UlpHistogram h;
    for (std::size_t b = 0; b < counts.size(); ++b)
        if (counts[b] > 0)
            h.buckets.emplace_back(b == 65 ? "nan" : ulp_bucket_label(b == 0 ? 0 : std::uint64_t{1} << (b - 1)),
                                   counts[b]);
    return h;
}

/// Checks a kernel output's dtype and shape against what the recipe and the inputs imply.
void check_output(const TensorFile& file, const Tensor& t, const emu::Format& format, const Shape& shape,
                  const std::string& recipe) {
    if (t.shape() != shape)
        throw Error("tensor '" + t.name() + "' of " + file.path + " is " + shape_string(t.shape()) +
                    " but q, k, v make it " + shape_string(shape));
    if (t.dtype() != emu::dtype_of(format))
        throw Error("tensor '" + t.name() + "' of " + file.path + " is " + std::string(name(t.dtype())) +
                    " but recipe " + recipe + " writes it in " + std::string(format.name) +
                    ": compare it with a recipe whose formats are the kernel's (its o_format and grad_format)");
}

/// The bits alone, where the comparison runs without the truth (a recipe search).
OutputComparison compare_bits_only(const OutputSides& s) {
    OutputComparison c;
    c.name = s.kernel->name();
    c.dtype = s.kernel->dtype();
    std::vector<std::uint32_t> kernel(s.emulated.size());
    for (std::uint64_t i = 0; i < kernel.size(); ++i)
        kernel[i] = static_cast<std::uint32_t>(s.kernel->bits_at(s.element(i)));
    const emu::BitComparison b = emu::compare_bits(s.emulated, kernel, *s.format);
    c.matched = b.matched, c.total = b.total, c.max_ulp = b.max_ulp;
    return c;
}

OutputComparison compare_output(const OutputSides& s, const CompareChoice& choice) {
    if (s.truth == nullptr) return compare_bits_only(s);
    const std::size_t worst_count = choice.worst_count;
    const Tensor& t = *s.kernel;
    const emu::Format& f = *s.format;
    const std::vector<double>& truth = *s.truth;
    const std::uint64_t n = truth.size();
    OutputComparison c;
    c.name = t.name();
    c.dtype = t.dtype();
    std::vector<std::uint32_t> kernel(n);
    std::vector<double> values(n);
    for (std::uint64_t i = 0; i < n; ++i) {
        kernel[i] = static_cast<std::uint32_t>(t.bits_at(s.element(i)));
        values[i] = emu::decode(f, kernel[i]);
    }
    c.sums = error_sums(values, truth);
    c.truth_error = error_stats_of(c.sums);

    // Distances from the truth rounded once into the output's dtype (nearest even).
    std::vector<std::uint64_t> ulps(n);
    c.bucket_counts.assign(ulp_buckets, 0);
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto rounded = static_cast<std::uint32_t>(emu::cast_from_f64(truth[i], f, emu::CastOptions{}));
        ulps[i] = emu::ulp_distance(f, kernel[i], rounded);
        ++c.bucket_counts[ulps[i] == no_distance ? 65 : static_cast<std::size_t>(std::bit_width(ulps[i]))];
    }
    c.ulp_histogram = histogram_of(c.bucket_counts);

    // The largest errors (NaN first), ties by position.
    std::vector<std::uint64_t> order(n);
    for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
    const std::size_t k = std::min<std::size_t>(worst_count, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::uint64_t a, std::uint64_t b) {
                          const double ea = distance(values[a], truth[a]), eb = distance(values[b], truth[b]);
                          return ea != eb ? ea > eb : a < b;
                      });
    for (std::size_t j = 0; j < k; ++j) {
        const std::uint64_t i = order[j];
        c.worst.push_back(
            {unravel(s.element(i), t.shape()), values[i], truth[i], emu::decode(f, s.emulated[i]), ulps[i]});
    }

    const emu::BitComparison b = emu::compare_bits(s.emulated, kernel, f);
    c.matched = b.matched, c.total = b.total, c.max_ulp = b.max_ulp;
    add_ci_statistics(c, s, kernel, values, choice);
    return c;
}

OutputComparison merge_output(const std::vector<const OutputComparison*>& parts, std::size_t worst_count) {
    OutputComparison c;
    c.name = parts.front()->name, c.dtype = parts.front()->dtype;
    c.bucket_counts.assign(ulp_buckets, 0);
    for (const OutputComparison* p : parts) {
        const ErrorSums& x = p->sums;
        c.sums.max_abs = std::isnan(c.sums.max_abs) || std::isnan(x.max_abs) ? std::numeric_limits<double>::quiet_NaN()
                                                                             : std::max(c.sums.max_abs, x.max_abs);
        c.sums.squared += x.squared, c.sums.norm += x.norm, c.sums.finite += x.finite;
        for (std::size_t b = 0; b < p->bucket_counts.size(); ++b)
            c.bucket_counts.at(b) += p->bucket_counts[b];  // none: bits alone
        c.worst.insert(c.worst.end(), p->worst.begin(), p->worst.end());
        c.matched += p->matched, c.total += p->total, c.max_ulp = std::max(c.max_ulp, p->max_ulp);
        // The heads come in order: the first NaN is the first head's, and of equal distances
        // the earlier head's is kept.
        c.max_row_ulp = std::max(c.max_row_ulp, p->max_row_ulp);
        c.sign_flips_near_zero += p->sign_flips_near_zero;
        if (c.nonfinite == 0) c.first_nonfinite = p->first_nonfinite;
        c.nonfinite += p->nonfinite;
        if (p->largest_difference && (!c.largest_difference || p->largest_difference->ulp > c.largest_difference->ulp))
            c.largest_difference = p->largest_difference;
        if (p->outside_tolerance) c.outside_tolerance = c.outside_tolerance.value_or(0) + *p->outside_tolerance;
    }
    c.truth_error = error_stats_of(c.sums);
    c.ulp_histogram = histogram_of(c.bucket_counts);
    // Each head kept its worst, so the file's worst are among them. Indices order as positions.
    std::stable_sort(c.worst.begin(), c.worst.end(), [](const WorstElement& a, const WorstElement& b) {
        const double ea = distance(a.kernel, a.truth), eb = distance(b.kernel, b.truth);
        return ea != eb ? ea > eb : a.index < b.index;
    });
    if (c.worst.size() > worst_count) c.worst.resize(worst_count);
    return c;
}

// Each output's comparison, and their bit counts added.
KernelComparison comparison_of(const emu::AttentionShape& shape, const std::vector<OutputSides>& sides,
                               const CompareChoice& choice) {
    KernelComparison r{shape, {}, 0, 0};
    for (const OutputSides& s : sides) {
        r.outputs.push_back(compare_output(s, choice));
        r.matched += r.outputs.back().matched;
        r.total += r.outputs.back().total;
    }
    return r;
}

/// The output `name` of the file where the comparison covers it (outputs empty: all), else null.
const Tensor* chosen(const TensorFile& file, const char* name, const std::vector<std::string>& outputs) {
    if (!outputs.empty() && std::find(outputs.begin(), outputs.end(), name) == outputs.end()) return nullptr;
    return file.find(name);
}

}  // namespace

Shape unravel(std::uint64_t i, const Shape& shape) {
    Shape index(shape.size());
    for (std::size_t k = shape.size(); k-- > 0;) {
        index[k] = i % shape[k];
        i /= shape[k];
    }
    return index;
}

const std::vector<std::string>& kernel_output_names() {
    static const std::vector<std::string> names{"o", "lse", "dq", "dk", "dv"};
    return names;
}

std::vector<std::string> parse_output_names(const std::string& list, const std::string& what) {
    const std::string prefix = what.empty() ? "" : what + ": ";
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = list.find(',', start);
        const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const auto& known = kernel_output_names();
        if (std::find(known.begin(), known.end(), name) == known.end())
            throw Error(what + ": '" + name + "' is not an output (o, lse, dq, dk, dv; comma-separated)");
        if (std::find(out.begin(), out.end(), name) != out.end()) throw Error(what + ": '" + name + "' is named twice");
        out.push_back(name);
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

std::string output_format_mismatch(const TensorFile& file, const emu::AttentionRecipe& recipe) {
    const std::pair<const char*, const emu::Format*> outputs[] = {{"o", recipe.output.format},
                                                                  {"lse", &emu::f32},
                                                                  {"dq", recipe.backward.grad_format},
                                                                  {"dk", recipe.backward.grad_format},
                                                                  {"dv", recipe.backward.grad_format}};
    for (const auto& [name, format] : outputs) {
        const Tensor* t = file.find(name);
        if (t != nullptr && t->dtype() != emu::dtype_of(*format)) {
            std::string also;  // presets that write the kernel's dtype
            for (const emu::AttentionRecipe& p : emu::recipe_presets())
                if (p.output.format != nullptr && emu::dtype_of(*p.output.format) == t->dtype() &&
                    std::string(name) == "o")
                    also += (also.empty() ? "" : ", ") + p.name;
            return std::string(name) + " is " + std::string(roundscope::name(t->dtype())) + "; recipe " + recipe.name +
                   " writes " + std::string(format->name) + (also.empty() ? "" : " (" + also + " write o in it)");
        }
    }
    return {};
}

void check_kernel_output_shapes(const TensorFile& file, const emu::AttentionInputs& in) {
    // the recipe's formats made the file's own, so that only the shapes are checked
    emu::AttentionRecipe own = emu::find_recipe("fa2-bf16");
    if (const Tensor* o = file.find("o"); o != nullptr && is_floating(o->dtype()))
        own.output.format = &emu::format_of(o->dtype());
    for (const char* g : {"dq", "dk", "dv"})
        if (const Tensor* t = file.find(g); t != nullptr && is_floating(t->dtype()))
            own.backward.grad_format = &emu::format_of(t->dtype());
    check_kernel_outputs(file, in, own);
}

void check_kernel_outputs(const TensorFile& file, const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe,
                          const std::vector<std::string>& outputs) {
    for (const std::string& name : outputs) {
        const auto& known = kernel_output_names();
        if (std::find(known.begin(), known.end(), name) == known.end())
            throw Error("'" + name + "' is not a kernel output (o, lse, dq, dk, dv)");
        if (file.find(name) == nullptr)
            throw Error(file.path + " holds no '" + name + "' to compare (the kernel did not write it)");
    }
    const Tensor* o = chosen(file, "o", outputs);
    const Tensor* lse = chosen(file, "lse", outputs);
    const Tensor* grads[] = {chosen(file, "dq", outputs), chosen(file, "dk", outputs), chosen(file, "dv", outputs)};
    const bool backward = grads[0] || grads[1] || grads[2];
    if (!o && !lse && !backward)
        throw Error(file.path + " holds nothing a kernel wrote to compare (o, lse, dq, dk or dv)");
    if (backward && !in.d_o)
        throw Error("tensor '" +
                    (grads[0]   ? grads[0]
                     : grads[1] ? grads[1]
                                : grads[2])
                        ->name() +
                    "' of " + file.path + ": the gradients need 'do', the gradient of o, in the same file");

    if (o) check_output(file, *o, *recipe.output.format, output_shape(in, {in.n_q, in.d_v}), recipe.name);
    if (lse) check_output(file, *lse, emu::f32, output_shape(in, {in.n_q}), recipe.name);
    const Shape grad_shapes[] = {output_shape(in, {in.n_q, in.d}), kv_output_shape(in, {in.n_kv, in.d}),
                                 kv_output_shape(in, {in.n_kv, in.d_v})};
    for (int g = 0; g < 3; ++g)
        if (grads[g]) check_output(file, *grads[g], *recipe.backward.grad_format, grad_shapes[g], recipe.name);
}

KernelComparison compare_kernel_head(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                     const CompareChoice& choice) {
    const std::vector<std::string>& outputs = choice.outputs;
    check_kernel_outputs(file, in, recipe, outputs);
    const Tensor* o = chosen(file, "o", outputs);
    const Tensor* lse = chosen(file, "lse", outputs);
    const Tensor* grads[] = {chosen(file, "dq", outputs), chosen(file, "dk", outputs), chosen(file, "dv", outputs)};
    const bool backward = grads[0] || grads[1] || grads[2];
    const std::uint64_t nq = in.n_q, nk = in.n_kv, group = emu::kv_group(in);
    AttentionRunOptions run_options = options;
    run_options.backward = backward;
    run_options.truth = choice.truth;
    // the head's own dK and dV are compared only where it is its group (without grouped queries)
    run_options.key_gradients = group == 1 && (grads[1] || grads[2]);
    // dK and dV sum over a key-value head's group: compared once a group, with its first head,
    // from the whole group's run (without grouped-query attention, this head's run).
    std::optional<AttentionRun> group_run;
    if ((grads[1] || grads[2]) && head % group == 0 && group > 1) {
        AttentionRunOptions g = run_options;
        g.known_truth = options.known_group_truth, g.key_gradients = true;
        group_run.emplace(run_attention(emu::group_inputs(in, head / group), recipe, g));
    }
    // The head's O, LSE and dQ: where the group was run, its first head, which is this head with
    // the same bits (a head's rows depend on no other head of a run: tests/analysis/
    // test_kernel_compare.cpp holds every recipe to it), so the head is not run again.
    std::optional<AttentionRun> own;
    if (!group_run) own.emplace(run_attention(emu::head_inputs(in, head), recipe, run_options));
    const AttentionRun& run = own ? *own : *group_run;
    const emu::AttentionShape shape =
        own ? own->shape : emu::attention_shape_of(emu::head_inputs(in, head), options.causal, options.scale);
    auto first = [](const auto& v, std::uint64_t n) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin(),
                                                                           v.begin() + static_cast<std::ptrdiff_t>(n));
    };
    std::optional<AttentionTruth> head_truth;
    if (run.truth && group_run) {
        head_truth.emplace();
        head_truth->o = first(run.truth->o, nq * in.d_v), head_truth->lse = first(run.truth->lse, nq);
        if (!run.truth->dq.empty()) head_truth->dq = first(run.truth->dq, nq * in.d);
    }
    const AttentionTruth* truth = head_truth ? &*head_truth : run.truth ? &*run.truth : nullptr;

    std::vector<OutputSides> sides;
    if (o)
        sides.push_back({o, head * nq * in.d_v, recipe.output.format, first(run.forward.o, nq * in.d_v),
                         (truth ? &truth->o : nullptr), nullptr, 1, in.d_v});
    if (lse)
        sides.push_back(
            {lse, head * nq, &emu::f32, float_bits(first(run.forward.lse, nq)), (truth ? &truth->lse : nullptr)});
    if (grads[0])
        sides.push_back({grads[0], head * nq * in.d, recipe.backward.grad_format, first(run.backward->dq, nq * in.d),
                         (truth ? &truth->dq : nullptr), nullptr, 1, in.d});
    if (head % group == 0) {
        const std::uint64_t kv = head / group;
        if (grads[1])
            sides.push_back({grads[1], kv * nk * in.d, recipe.backward.grad_format, run.backward->dk,
                             (run.truth ? &run.truth->dk : nullptr), nullptr, 1, in.d});
        if (grads[2])
            sides.push_back({grads[2], kv * nk * in.d_v, recipe.backward.grad_format, run.backward->dv,
                             (run.truth ? &run.truth->dv : nullptr), nullptr, 1, in.d_v});
    }
    return comparison_of(shape, sides, choice);
}

KernelComparison compare_kernel_rows(const TensorFile& file, const emu::AttentionInputs& in, std::uint64_t head,
                                     const emu::AttentionInputs& sample, const emu::AttentionRecipe& recipe,
                                     const AttentionRunOptions& options, const CompareChoice& choice) {
    check_kernel_outputs(file, in, recipe, choice.outputs);
    if (!sample.query_rows || sample.query_rows_of != in.n_q || sample.batch * sample.heads != 1)
        throw Error("compare_kernel_rows: the sample must be of one head's query rows");
    const Tensor* o = chosen(file, "o", choice.outputs);
    const Tensor* lse = chosen(file, "lse", choice.outputs);
    AttentionRunOptions run_options = options;
    run_options.backward = false;
    run_options.truth = choice.truth;
    const AttentionRun run = run_attention(sample, recipe, run_options);
    const AttentionTruth* truth = run.truth ? &*run.truth : nullptr;
    const std::vector<std::uint64_t>* rows = sample.query_rows.get();
    std::vector<OutputSides> sides;
    if (o)
        sides.push_back({o, head * in.n_q * in.d_v, recipe.output.format, run.forward.o, (truth ? &truth->o : nullptr),
                         rows, in.d_v, in.d_v});
    if (lse)
        sides.push_back(
            {lse, head * in.n_q, &emu::f32, float_bits(run.forward.lse), (truth ? &truth->lse : nullptr), rows, 1, 1});
    return comparison_of(run.shape, sides, choice);
}

KernelComparison merge_heads(const std::vector<KernelComparison>& heads, const emu::AttentionShape& shape,
                             std::size_t worst_count) {
    KernelComparison r{shape, {}, 0, 0};
    // Outputs by name in the order they first appear (under grouped-query attention dK and dV
    // come only with each group's first head).
    std::vector<std::string> names;
    for (const KernelComparison& h : heads)
        for (const OutputComparison& x : h.outputs)
            if (std::find(names.begin(), names.end(), x.name) == names.end()) names.push_back(x.name);
    for (const std::string& name : names) {
        std::vector<const OutputComparison*> parts;
        for (const KernelComparison& h : heads)
            for (const OutputComparison& x : h.outputs)
                if (x.name == name) parts.push_back(&x);
        r.outputs.push_back(merge_output(parts, worst_count));
        r.matched += r.outputs.back().matched;
        r.total += r.outputs.back().total;
    }
    return r;
}

KernelComparison compare_kernel(const TensorFile& file, const emu::AttentionInputs& in,
                                const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                const CompareChoice& choice) {
    check_kernel_outputs(file, in, recipe, choice.outputs);
    AttentionRunOptions per_head = options;
    per_head.known_truth = nullptr;  // each head's own
    std::vector<KernelComparison> heads;
    for (std::uint64_t h = 0; h < emu::head_count(in); ++h)
        heads.push_back(compare_kernel_head(file, in, h, recipe, per_head, choice));
    return merge_heads(heads, emu::attention_shape_of(in, options.causal, options.scale), choice.worst_count);
}

}  // namespace roundscope::analysis
