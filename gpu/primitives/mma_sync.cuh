#pragma once
// mma.sync as the PTX ISA lays out its operands (8.x, "Matrix fragments for mma.m16n8k16" and
// "mma.m16n8k32"): the register fragments of A, B and C/D for one warp, and the instruction,
// for BF16, FP16 and (sm_89+) FP8 inputs with float32 accumulators. Shared by the MMA probe
// and the flash-attention kernels. Operand accessors: op.A(r, c) and op.B(k, n) give bits.
#include <cstdint>
#include <string>

#include "emu/numbers/format.hpp"
#include "gpu/primitives/simt.hpp"
#include "lib/error.hpp"
#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/warp_mma.hpp"
#endif

namespace roundscope::gpu {

enum class Input : int { bf16, f16, e4m3, e5m2 };

/// The mma.sync input type of a format; Error for one without an instruction here.
inline Input input_of(const emu::Format& f) {
    if (f == emu::bf16) return Input::bf16;
    if (f == emu::f16) return Input::f16;
    if (f == emu::e4m3) return Input::e4m3;
    if (f == emu::e5m2) return Input::e5m2;
    throw Error("GPU: no mma.sync for " + std::string(f.name) + " inputs");
}

/// Products per instruction: k16 for 16-bit inputs, k32 for FP8.
constexpr int mma_depth(Input in) { return in == Input::e4m3 || in == Input::e5m2 ? 32 : 16; }

constexpr bool is_fp8(Input in) { return in == Input::e4m3 || in == Input::e5m2; }

/// The format of an mma.sync input type.
inline const emu::Format& format_of(Input in) {
    constexpr const emu::Format* formats[] = {&emu::bf16, &emu::f16, &emu::e4m3, &emu::e5m2};
    return *formats[static_cast<int>(in)];
}

ROUNDSCOPE_DEVICE inline std::uint32_t pack2(std::uint32_t lo, std::uint32_t hi) { return (lo & 0xFFFF) | (hi << 16); }
ROUNDSCOPE_DEVICE inline std::uint32_t pack4(std::uint32_t e0, std::uint32_t e1, std::uint32_t e2, std::uint32_t e3) {
    return (e0 & 0xFF) | (e1 & 0xFF) << 8 | (e2 & 0xFF) << 16 | (e3 & 0xFF) << 24;
}

// The A fragment of rows [row0, row0 + 16) for one warp (mma.sync, and wgmma with A in
// registers, whose per-warp slice has the same layout). g = lane / 4, t = lane % 4.
template <Input in, class Operands>
ROUNDSCOPE_DEVICE void load_a_fragment(const Operands& op, int row0, int lane, std::uint32_t (&ra)[4]) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (is_fp8(in)) {
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + g + (i & 1) * 8, c = t * 4 + (i >> 1) * 16;
            ra[i] = pack4(op.A(r, c), op.A(r, c + 1), op.A(r, c + 2), op.A(r, c + 3));
        }
    } else {
        for (int i = 0; i < 4; ++i) {
            const int r = row0 + g + (i & 1) * 8, c = t * 2 + (i >> 1) * 8;
            ra[i] = pack2(op.A(r, c), op.A(r, c + 1));
        }
    }
}

template <Input in, class Operands>
ROUNDSCOPE_DEVICE void load_b_fragment(const Operands& op, int lane, std::uint32_t (&rb)[2]) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (is_fp8(in)) {
        for (int i = 0; i < 2; ++i) {
            const int k = t * 4 + i * 16;
            rb[i] = pack4(op.B(k, g), op.B(k + 1, g), op.B(k + 2, g), op.B(k + 3, g));
        }
    } else {
        for (int i = 0; i < 2; ++i) {
            const int k = t * 2 + i * 8;
            rb[i] = pack2(op.B(k, g), op.B(k + 1, g));
        }
    }
}

/// Calls f.template operator()<in>() for the run-time input type `in`: the kernels are
/// instantiated per input type.
template <class F>
void with_input(Input in, F f) {
    switch (in) {
        case Input::bf16:
            f.template operator()<Input::bf16>();
            break;
        case Input::f16:
            f.template operator()<Input::f16>();
            break;
        case Input::e4m3:
            f.template operator()<Input::e4m3>();
            break;
        case Input::e5m2:
            f.template operator()<Input::e5m2>();
            break;
    }
}

// C/D fragment: d[0], d[1] at row g, columns 2t, 2t + 1; d[2], d[3] at row g + 8.
ROUNDSCOPE_DEVICE inline int fragment_row(int lane, int i) { return (lane >> 2) + (i >> 1) * 8; }
ROUNDSCOPE_DEVICE inline int fragment_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

template <Input in>
ROUNDSCOPE_DEVICE void mma_sync(std::uint32_t (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if defined(ROUNDSCOPE_SIMT_HOST)
    simt::warp_mma(format_of(in), d, a, b);
#else
#define ROUNDSCOPE_MMA_OPERANDS                      \
    : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                               \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])
    if constexpr (in == Input::bf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};" ROUNDSCOPE_MMA_OPERANDS);
    } else if constexpr (in == Input::f16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};" ROUNDSCOPE_MMA_OPERANDS);
    } else {
#if __CUDA_ARCH__ >= 890
        if constexpr (in == Input::e4m3) {
            asm volatile(
                "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};" ROUNDSCOPE_MMA_OPERANDS);
        } else {
            asm volatile(
                "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};" ROUNDSCOPE_MMA_OPERANDS);
        }
#else
        __trap();
#endif
    }
#undef ROUNDSCOPE_MMA_OPERANDS
#endif
}

}  // namespace roundscope::gpu
