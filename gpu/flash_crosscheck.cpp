#include "gpu/flash_crosscheck.hpp"

#include <algorithm>

#include "emu/numbers/unpack.hpp"
#include "gpu/device.hpp"
#include "gpu/kernels/flash_attention.hpp"
#include "gpu/kernels/hopper_flash.hpp"
#include "gpu/kernels/hopper_flash_backward.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu {
namespace {

void add(FlashCrosscheck& c, const std::string& name, const std::vector<std::uint32_t>& emulator,
         const std::vector<std::uint32_t>& gpu, const emu::Format& f) {
    const emu::BitComparison b = emu::compare_bits(emulator, gpu, f);
    c.outputs[name] = b;
    if (b.first_mismatch && *b.first_mismatch < std::min(emulator.size(), gpu.size()))
        c.first_values[name] = {emu::decode(f, emulator[*b.first_mismatch]), emu::decode(f, gpu[*b.first_mismatch])};
    c.total.matched += b.matched, c.total.total += b.total, c.total.max_ulp = std::max(c.total.max_ulp, b.max_ulp);
}

}  // namespace

FlashCrosscheck flash_crosscheck(emu::AttentionRecipe recipe, const emu::AttentionShape& shape,
                                 const emu::AttentionOperands& in, bool backward, int threads) {
    const int cc = compute_capability();
    if (cc == 0) throw Error("crosscheck: no CUDA GPU is usable on this machine");
    FlashCrosscheck c;
    c.device = device_name();
    c.arch = recipe.target.arch = model_arch(cc);
    if (hopper_flash_unsupported(recipe, shape).empty()) {
        if (backward) {
            if (const std::string why = hopper_flash_backward_unsupported(recipe, shape); !why.empty())
                throw Error("crosscheck: recipe '" + recipe.name + "' runs on the Hopper kernel, whose backward " +
                            "cannot run it: " + why);
        }
        c.kernel = "hopper";
        const emu::ForwardResult want = emu::flash_forward(recipe, shape, in, threads),
                                 got = hopper_flash_forward(recipe, shape, in);
        add(c, "o", want.o, got.o, *recipe.output.format);
        add(c, "o_f32", float_bits(want.o_f32), float_bits(got.o_f32), emu::f32);
        add(c, "lse", float_bits(want.lse), float_bits(got.lse), emu::f32);
        if (backward) {  // each from the kernel's own forward
            const emu::BackwardResult bw = emu::flash_backward(recipe, shape, in, got, threads),
                                      bg = hopper_flash_backward(recipe, shape, in, got);
            add(c, "dq", bw.dq, bg.dq, *recipe.backward.grad_format);
            add(c, "dk", bw.dk, bg.dk, *recipe.backward.grad_format);
            add(c, "dv", bw.dv, bg.dv, *recipe.backward.grad_format);
            add(c, "delta", float_bits(bw.delta), float_bits(bg.delta), emu::f32);
        }
        c.gpu_forward = got;
        return c;
    }
    c.kernel = "twins";
    if (std::string why = flash_unsupported(recipe);
        !why.empty() || !(why = flash_not_runnable_here(recipe, backward)).empty())
        throw Error("crosscheck: recipe '" + recipe.name + "' cannot run on " + c.device + ": " + why);
    const emu::ForwardResult want = emu::flash_forward(recipe, shape, in, threads),
                             got = gpu::flash_forward(recipe, shape, in);
    add(c, "o", want.o, got.o, *recipe.output.format);
    add(c, "lse", float_bits(want.lse), float_bits(got.lse), emu::f32);
    if (backward) {
        const emu::BackwardResult bw = emu::flash_backward(recipe, shape, in, want, threads),
                                  bg = gpu::flash_backward(recipe, shape, in, got);
        add(c, "dq", bw.dq, bg.dq, *recipe.backward.grad_format);
        add(c, "dk", bw.dk, bg.dk, *recipe.backward.grad_format);
        add(c, "dv", bw.dv, bg.dv, *recipe.backward.grad_format);
        add(c, "delta", float_bits(bw.delta), float_bits(bg.delta), emu::f32);
    }
    c.gpu_forward = got;
    return c;
}

}  // namespace roundscope::gpu
