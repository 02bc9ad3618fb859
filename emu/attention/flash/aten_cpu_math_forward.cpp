#include "emu/attention/flash/aten_cpu_math_forward.hpp"

#include <vector>

#include "emu/attention/flash/math_path_forward.hpp"
#include "emu/attention/math/aten_cpu_math.hpp"
#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/numbers/f32_arith.hpp"

namespace roundscope::emu::detail {

namespace a = f32_arith;

namespace {

constexpr float minus_inf = -__builtin_huge_valf();

}  // namespace

bool aten_cpu_math_softmax(const std::vector<float>& x, std::uint64_t n, std::vector<float>& p, float& m, float& l) {
    m = minus_inf;
    bool nan = false;
    for (std::uint64_t j = 0; j < n; ++j) nan = nan || x[j] != x[j], m = x[j] > m ? x[j] : m;
    if (nan) m = __builtin_nanf("");  // vec::maximum propagates a NaN
    if (m == minus_inf) return false;
    for (std::uint64_t j = 0; j < n; ++j) p[j] = inductor::expf(a::sub(x[j], m));
    l = aten_cpu::reduce_all_sum(p.data(), n);
    const float inverse = a::div(1.0f, l);
    for (std::uint64_t j = 0; j < n; ++j) p[j] = a::mul(p[j], inverse);
    return true;
}

void aten_cpu_math_rows(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, const std::uint32_t* v,
                        std::uint64_t head, Span rows, ForwardResult& out, std::uint64_t skip_keys) {
    math_path_rows(ctx, {aten_cpu_math_softmax, aten_cpu::libm_logf}, q, k, v, head, rows, out, skip_keys);
}

}  // namespace roundscope::emu::detail
