#pragma once
// ldmatrix and stmatrix (.m8n8, 16-bit elements, x1/x2/x4, optionally .trans) for kernel code,
// one spelling for both builds: under nvcc, the PTX instructions; with ROUNDSCOPE_SIMT_HOST, a
// warp-collective step of the simulated warp. For X matrices, lanes 8i to 8i + 7 give the
// shared-memory addresses of matrix i's eight rows (16 bytes each, 16-byte aligned); lane t's
// register i holds row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1 of matrix i (the low half
// first), or under .trans column t / 4 of rows 2 (t % 4) and 2 (t % 4) + 1: the PTX ISA's
// fragment of an mma operand.
#include <cstdint>
#include <cstring>

#include "gpu/primitives/simt.hpp"
#include "gpu/primitives/sync.hpp"

#if defined(ROUNDSCOPE_SIMT_HOST)
#include <fmt/format.h>

#include <array>
#include <utility>

#include "lib/error.hpp"
#endif

namespace roundscope::gpu {

namespace detail {

#if defined(ROUNDSCOPE_SIMT_HOST)
// The warp's row addresses (shared-memory offsets, checked) and, per matrix element (r, c) of
// matrix i, its byte in shared memory.
struct MatrixRows {
    std::array<std::uint32_t, 32> rows;
    std::byte* at(int matrix, int r, int c) const {
        return simt::current_block().shared + rows[static_cast<std::size_t>(8 * matrix + r)] + 2 * c;
    }
};

inline MatrixRows matrix_rows(const void* row, int x, const char* what) {
    const std::uint32_t offset = simt::shared_offset(row);
    const MatrixRows m{simt::warp_gather(offset)};
    for (int l = 0; l < 8 * x; ++l)
        if (m.rows[static_cast<std::size_t>(l)] % 16 != 0)
            throw Error(fmt::format("{}: lane {} gives row address +{}, not 16-byte aligned", what, l,
                                    m.rows[static_cast<std::size_t>(l)]));
    return m;
}

// The element of matrix i that lane t's register i holds, half h (0: low).
inline void fragment_element(int lane, int h, bool trans, int& r, int& c) {
    r = lane / 4, c = 2 * (lane % 4) + h;
    if (trans) std::swap(r, c);
}
#endif

}  // namespace detail

/// ldmatrix.sync.aligned.m8n8.xX{.trans}.shared.b16: registers reg[0..X) from X 8 x 8 matrices.
template <int X>
ROUNDSCOPE_DEVICE inline void ldmatrix(std::uint32_t (&reg)[X], const void* row, bool trans = false) {
    static_assert(X == 1 || X == 2 || X == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(ROUNDSCOPE_SIMT_HOST)
    const detail::MatrixRows m = detail::matrix_rows(row, X, "ldmatrix");
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (int i = 0; i < X; ++i) {
        std::uint16_t half[2];
        for (int h = 0; h < 2; ++h) {
            int r = 0, c = 0;
            detail::fragment_element(lane, h, trans, r, c);
            std::memcpy(&half[h], m.at(i, r, c), 2);
        }
        reg[i] = half[0] | std::uint32_t{half[1]} << 16;
    }
    simt::warp_gather(0);  // the reads done before any lane writes again
#else
    const std::uint32_t a = shared_address(row);
    if constexpr (X == 1) {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(reg[0]) : "r"(a));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(reg[0]) : "r"(a));
    } else if constexpr (X == 2) {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                         : "=r"(reg[0]), "=r"(reg[1])
                         : "r"(a));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                         : "=r"(reg[0]), "=r"(reg[1])
                         : "r"(a));
    } else {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
                         : "r"(a));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
                         : "r"(a));
    }
#endif
}

/// stmatrix.sync.aligned.m8n8.xX{.trans}.shared.b16: X 8 x 8 matrices from registers reg[0..X).
template <int X>
ROUNDSCOPE_DEVICE inline void stmatrix(const std::uint32_t (&reg)[X], void* row, bool trans = false) {
    static_assert(X == 1 || X == 2 || X == 4, "stmatrix stores 1, 2 or 4 matrices");
#if defined(ROUNDSCOPE_SIMT_HOST)
    const detail::MatrixRows m = detail::matrix_rows(row, X, "stmatrix");
    const int lane = static_cast<int>(threadIdx.x % 32);
    for (int i = 0; i < X; ++i) {
        for (int h = 0; h < 2; ++h) {
            int r = 0, c = 0;
            detail::fragment_element(lane, h, trans, r, c);
            const auto half = static_cast<std::uint16_t>(reg[i] >> (16 * h));
            std::memcpy(m.at(i, r, c), &half, 2);
        }
    }
    simt::warp_gather(0);  // the warp's writes done before any lane reads them
#else
    const std::uint32_t a = shared_address(row);
    if constexpr (X == 1) {
        if (trans)
            asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(a), "r"(reg[0]) : "memory");
        else
            asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(a), "r"(reg[0]) : "memory");
    } else if constexpr (X == 2) {
        if (trans)
            asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(a), "r"(reg[0]),
                         "r"(reg[1])
                         : "memory");
        else
            asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(a), "r"(reg[0]), "r"(reg[1])
                         : "memory");
    } else {
        if (trans)
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(reg[0]),
                         "r"(reg[1]), "r"(reg[2]), "r"(reg[3])
                         : "memory");
        else
            asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(reg[0]),
                         "r"(reg[1]), "r"(reg[2]), "r"(reg[3])
                         : "memory");
    }
#endif
}

}  // namespace roundscope::gpu
