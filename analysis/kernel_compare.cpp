#include "analysis/kernel_compare.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "emu/batch/tensor_cast.hpp"
#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/bit_compare.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

constexpr std::uint64_t no_distance = std::numeric_limits<std::uint64_t>::max();

/// An output the kernel wrote, with what the emulation and the truth give in its place.
struct OutputSides {
    const Tensor* kernel;
    const emu::Format* format;
    std::vector<std::uint32_t> emulated;
    const std::vector<double>* truth;
};

std::vector<std::uint32_t> float_bits(const std::vector<float>& x) {
    std::vector<std::uint32_t> bits(x.size());
    std::transform(x.begin(), x.end(), bits.begin(), [](float v) { return std::bit_cast<std::uint32_t>(v); });
    return bits;
}

Shape unravel(std::uint64_t i, const Shape& shape) {
    Shape index(shape.size());
    for (std::size_t k = shape.size(); k-- > 0;) {
        index[k] = i % shape[k];
        i /= shape[k];
    }
    return index;
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

/// The bucket label of a distance in ulps ("0", "1", "2-3", ..., "nan").
std::string ulp_bucket(std::uint64_t ulp) {
    if (ulp == no_distance) return "nan";
    if (ulp <= 1) return std::to_string(ulp);
    const int w = std::bit_width(ulp);  // [2^(w-1), 2^w)
    return std::to_string(std::uint64_t{1} << (w - 1)) + "-" + std::to_string((std::uint64_t{1} << (w - 1)) * 2 - 1);
}

OutputComparison compare_output(const OutputSides& s, std::size_t worst_count) {
    const Tensor& t = *s.kernel;
    const emu::Format& f = *s.format;
    OutputComparison c;
    c.name = t.name();
    c.dtype = t.dtype();
    const std::vector<double>& truth = *s.truth;
    std::vector<std::uint32_t> kernel(t.size());
    std::vector<double> values(t.size());
    for (std::uint64_t i = 0; i < t.size(); ++i) {
        kernel[i] = static_cast<std::uint32_t>(t.bits_at(i));
        values[i] = emu::decode(f, kernel[i]);
    }
    c.truth_error = error_stats(values, truth);

    // Distances from the truth rounded once into the output's dtype (nearest even).
    std::vector<std::uint64_t> ulps(t.size());
    std::vector<std::uint64_t> counts(66, 0);  // 0, 1, 2-3, ..., 2^63-, then "nan"
    for (std::uint64_t i = 0; i < t.size(); ++i) {
        const auto rounded = static_cast<std::uint32_t>(emu::cast_from_f64(truth[i], f, emu::CastOptions{}));
        ulps[i] = emu::ulp_distance(f, kernel[i], rounded);
        ++counts[ulps[i] == no_distance ? 65 : static_cast<std::size_t>(std::bit_width(ulps[i]))];
    }
    for (std::size_t b = 0; b < counts.size(); ++b)
        if (counts[b] > 0)
            c.ulp_histogram.buckets.emplace_back(b == 65 ? "nan" : ulp_bucket(b == 0 ? 0 : std::uint64_t{1} << (b - 1)),
                                                 counts[b]);

    // The largest errors (NaN first), ties by position.
    std::vector<std::uint64_t> order(t.size());
    for (std::uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    auto error_of = [&](std::uint64_t i) {
        const double e = std::fabs(values[i] - truth[i]);
        if (std::isinf(truth[i]) && values[i] == truth[i]) return 0.0;
        return std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
    };
    const std::size_t k = std::min<std::size_t>(worst_count, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::uint64_t a, std::uint64_t b) {
                          const double ea = error_of(a), eb = error_of(b);
                          return ea != eb ? ea > eb : a < b;
                      });
    for (std::size_t j = 0; j < k; ++j) {
        const std::uint64_t i = order[j];
        c.worst.push_back({unravel(i, t.shape()), values[i], truth[i], emu::decode(f, s.emulated[i]), ulps[i]});
    }

    const emu::BitComparison b = emu::compare_bits(s.emulated, kernel, f);
    c.matched = b.matched, c.total = b.total, c.max_ulp = b.max_ulp;
    return c;
}

}  // namespace

void check_kernel_outputs(const TensorFile& file, const emu::AttentionInputs& in, const emu::AttentionRecipe& recipe) {
    const Tensor* o = file.find("o");
    const Tensor* lse = file.find("lse");
    const Tensor* grads[] = {file.find("dq"), file.find("dk"), file.find("dv")};
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

    if (o) check_output(file, *o, *recipe.o_format, output_shape(in, {in.n_q, in.d_v}), recipe.name);
    if (lse) check_output(file, *lse, emu::f32, output_shape(in, {in.n_q}), recipe.name);
    const Shape grad_shapes[] = {output_shape(in, {in.n_q, in.d}), output_shape(in, {in.n_kv, in.d}),
                                 output_shape(in, {in.n_kv, in.d_v})};
    for (int g = 0; g < 3; ++g)
        if (grads[g]) check_output(file, *grads[g], *recipe.grad_format, grad_shapes[g], recipe.name);
}

KernelComparison compare_kernel(const TensorFile& file, const emu::AttentionInputs& in,
                                const emu::AttentionRecipe& recipe, const AttentionRunOptions& options,
                                std::size_t worst_count) {
    check_kernel_outputs(file, in, recipe);
    const Tensor* o = file.find("o");
    const Tensor* lse = file.find("lse");
    const Tensor* grads[] = {file.find("dq"), file.find("dk"), file.find("dv")};
    const bool backward = grads[0] || grads[1] || grads[2];
    AttentionRunOptions run_options = options;
    run_options.backward = backward;
    run_options.truth = true;
    const AttentionRun run = run_attention(in, recipe, run_options);
    const AttentionTruth& truth = *run.truth;

    std::vector<OutputSides> sides;
    if (o) sides.push_back({o, recipe.o_format, run.forward.o, &truth.o});
    if (lse) sides.push_back({lse, &emu::f32, float_bits(run.forward.lse), &truth.lse});
    if (backward) {
        const std::vector<std::uint32_t>* emulated[] = {&run.backward->dq, &run.backward->dk, &run.backward->dv};
        const std::vector<double>* truths[] = {&truth.dq, &truth.dk, &truth.dv};
        for (int g = 0; g < 3; ++g)
            if (grads[g]) sides.push_back({grads[g], recipe.grad_format, *emulated[g], truths[g]});
    }

    KernelComparison r{run.shape, {}, 0, 0};
    for (const OutputSides& s : sides) {
        r.outputs.push_back(compare_output(s, worst_count));
        r.matched += r.outputs.back().matched;
        r.total += r.outputs.back().total;
    }
    return r;
}

}  // namespace roundscope::analysis
