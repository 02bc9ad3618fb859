#include "emu/mma/aten_blas_gemm.hpp"

#include <array>
#include <vector>

#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::emu {
namespace {

std::vector<float> widened(const Format& in, const std::uint32_t* x, std::uint64_t count) {
    std::vector<float> out(count);
    for (std::uint64_t i = 0; i < count; ++i) out[i] = static_cast<float>(decode(in, x[i]));
    return out;
}

std::uint32_t narrowed(const Format& in, float x) {
    return static_cast<std::uint32_t>(cast_from_f32(x, in, CastOptions{}));
}

}  // namespace

void aten_blas_gemm_dot_add(const Format& in, const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* c,
                            std::uint64_t m, std::uint64_t n, std::uint64_t k, float alpha) {
    namespace f = f32_arith;
    const std::vector<float> ad = widened(in, a, m * k), bd = widened(in, b, k * n);
    const std::uint64_t whole = k / 4 * 4;
    for (std::uint64_t i = 0; i < m; ++i)
        for (std::uint64_t j = 0; j < n; ++j) {
            std::array<float, 4> part{};
            for (std::uint64_t l = 0; l < k; ++l) {
                const std::uint64_t slot = l < whole ? l % 4 : 0;
                part[slot] = f::add(part[slot], f::mul(ad[i * k + l], bd[l * n + j]));
            }
            const float dot = f::add(f::add(f::add(part[0], part[1]), part[2]), part[3]);
            const float old = static_cast<float>(decode(in, c[i * n + j]));
            c[i * n + j] = narrowed(in, f::add(old, f::mul(alpha, dot)));
        }
}

void aten_blas_gemm_axpy_add(const Format& in, const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* c,
                             std::uint64_t m, std::uint64_t n, std::uint64_t k, float alpha) {
    namespace f = f32_arith;
    const std::vector<float> bd = widened(in, b, k * n);
    std::vector<float> acc(n);
    for (std::uint64_t i = 0; i < m; ++i) {
        for (std::uint64_t j = 0; j < n; ++j) acc[j] = static_cast<float>(decode(in, c[i * n + j]));
        for (std::uint64_t l = 0; l < k; ++l) {
            const float val = f::mul(static_cast<float>(decode(in, a[i * k + l])), alpha);
            for (std::uint64_t j = 0; j < n; ++j) acc[j] = f::fma(bd[l * n + j], val, acc[j]);
        }
        for (std::uint64_t j = 0; j < n; ++j) c[i * n + j] = narrowed(in, acc[j]);
    }
}

}  // namespace roundscope::emu
