#pragma once
// The FP8 kernel's tile steps for the shared walk (../mainloop.cuh says what each is): FP8's
// block_n keys a tile, the E4M3 GEMMs of gemms.cuh, the softmax and the cast of softmax.cuh.
#include <cstdint>

#include "gpu/kernels/hopper/fp8/config.cuh"
#include "gpu/kernels/hopper/fp8/consumer_state.cuh"
#include "gpu/kernels/hopper/fp8/gemms.cuh"
#include "gpu/kernels/hopper/fp8/softmax.cuh"
#include "gpu/kernels/hopper/mainloop.cuh"

namespace roundscope::gpu::hopper::fp8 {

template <int D, emu::Exp2Kind Exp2, emu::Exp2Arg Arg>
struct Fp8Steps {
    static constexpr int block_n = fp8::block_n<D>;
    using Params = ForwardParams;
    using State = ConsumerState<D>;
    ROUNDSCOPE_DEVICE static void issue_scores(State& c, ConsumerOperands& in, RingSlot slot) {
        fp8::issue_scores<D>(c.s, in.ring, in.smem, in.q_rows, slot);
    }
    ROUNDSCOPE_DEVICE static void issue_pv(State& c, ConsumerOperands& in, RingSlot slot) {
        fp8::issue_pv<D>(c.o, c.p, in.ring, in.smem, slot);
    }
    template <bool Masked>
    ROUNDSCOPE_DEVICE static void softmax(const Params& p, State& c, std::uint64_t key0, float (&factor)[2]) {
        softmax_tile<D, Exp2, Arg, Masked>(p, c, key0, factor);
    }
    ROUNDSCOPE_DEVICE static void rescale_and_cast(const Params&, State& c, const float (&factor)[2]) {
        fp8::rescale_and_cast<D>(c, factor);
    }
};

}  // namespace roundscope::gpu::hopper::fp8
