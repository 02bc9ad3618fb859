#include "emu/attention/flash/cuda_math_forward.hpp"

#include <array>
#include <vector>

#include "emu/attention/flash/math_path_forward.hpp"
#include "emu/attention/math/libdevice_math.hpp"
#include "emu/numbers/f32_arith.hpp"

namespace roundscope::emu::detail {

namespace a = f32_arith;

namespace {

// softmax_warp_forward's lanes: the row padded to a power of two, over min(that, 32) lanes.
int warp_lanes(std::uint64_t n_kv) {
    std::uint64_t pow2 = 1;
    while (pow2 < n_kv) pow2 *= 2;
    return static_cast<int>(pow2 < 32 ? pow2 : 32);
}

// One row's softmax as softmax_warp_forward computes it, x its n scores (masked ones -inf):
// p into `p`, m and l into the arguments; false for a row of -inf only (_safe_softmax's zeros).
bool warp_softmax(const std::vector<float>& x, std::uint64_t n, std::vector<float>& p, float& m, float& l) {
    const int lanes = warp_lanes(n);
    constexpr float minus_inf = -__builtin_huge_valf();
    std::array<float, 32> lane_max{}, lane_sum{};
    const auto iterations = (n + static_cast<std::uint64_t>(lanes) - 1) / static_cast<std::uint64_t>(lanes);
    for (int lane = 0; lane < lanes; ++lane) {
        float mx = minus_inf;  // the elements past n are -inf
        for (std::uint64_t it = 0; it < iterations; ++it) {
            const std::uint64_t j = it * static_cast<std::uint64_t>(lanes) + static_cast<std::uint64_t>(lane);
            const float e = j < n ? x[j] : minus_inf;
            mx = it == 0 ? e : (mx > e ? mx : e);
        }
        lane_max[lane] = mx;
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        std::array<float, 32> next{};
        for (int lane = 0; lane < lanes; ++lane) {
            const float b = lane_max[lane ^ offset];
            next[lane] = lane_max[lane] < b ? b : lane_max[lane];
        }
        lane_max = next;
    }
    m = lane_max[0];
    bool any = false;
    for (std::uint64_t j = 0; j < n; ++j) any = any || x[j] != minus_inf;
    if (!any) return false;
    for (int lane = 0; lane < lanes; ++lane) {
        float sum = 0.0f;
        for (std::uint64_t j = static_cast<std::uint64_t>(lane); j < n; j += static_cast<std::uint64_t>(lanes)) {
            p[j] = libdevice_expf(a::sub(x[j], m));
            sum = a::add(sum, p[j]);
        }
        lane_sum[lane] = sum;
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        std::array<float, 32> next{};
        for (int lane = 0; lane < lanes; ++lane) next[lane] = a::add(lane_sum[lane], lane_sum[lane ^ offset]);
        lane_sum = next;
    }
    l = lane_sum[0];
    for (std::uint64_t j = 0; j < n; ++j) p[j] = a::div(p[j], l);
    return true;
}

}  // namespace

void cuda_math_rows(const FlashContext& ctx, const std::uint32_t* q, const std::uint32_t* k, const std::uint32_t* v,
                    std::uint64_t head, Span rows, ForwardResult& out, std::uint64_t skip_keys) {
    math_path_rows(ctx, {warp_softmax, libdevice_logf}, q, k, v, head, rows, out, skip_keys);
}

}  // namespace roundscope::emu::detail
