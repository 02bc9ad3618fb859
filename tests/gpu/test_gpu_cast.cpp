// Property (on a machine with a GPU): the CUDA cast kernel gives the CPU emulator's bits on all
// 2^32 float32 inputs, for e4m3 (satfinite), bf16 and e2m1 in nearest-even, and in every other
// mode on a 2^28-input sweep; and cvt.rn.satfinite.bf16x2.f32, the Hopper kernel's cast of P and
// O, equals emu::bf16_saturating_rne on every input in each half of the pair. Exits 77 (CTest:
// skipped) where no GPU is usable.
#include <cstdio>
#include <utility>
#include <vector>

#include "emu/batch/batch_cast.hpp"
#include "emu/numbers/round.hpp"
#include "gpu/device.hpp"
#include "tests/gpu/gpu_or_skip.hpp"

using namespace roundscope;

namespace {

template <class Bits>
std::uint64_t mismatches(const emu::Format& f, const char* mode, std::uint64_t stride) {
    emu::CastOptions o = emu::convention_options(emu::Convention::cuda, f);
    emu::parse_rounding_mode(mode, o);
    o.seed = 5;
    const std::size_t chunk = std::size_t{1} << 24;
    std::vector<float> in(chunk);
    std::vector<Bits> cpu(chunk), gpu(chunk);
    std::uint64_t bad = 0;
    for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += chunk * stride) {
        for (std::size_t i = 0; i < chunk; ++i) in[i] = float_from_bits(static_cast<std::uint32_t>(base + i));
        emu::cast_batch(std::span<const float>(in), f, o, std::span<Bits>(cpu), {base, 0});
        gpu::cast_batch(std::span<const float>(in), f, o, std::span<Bits>(gpu), base);
        for (std::size_t i = 0; i < chunk; ++i) bad += cpu[i] != gpu[i];
    }
    std::printf("%s %s: %llu mismatches\n", std::string(f.name).c_str(), mode, static_cast<unsigned long long>(bad));
    return bad;
}

}  // namespace

int main() {
    test::compute_capability_or_skip();
    std::printf("GPU: %s\n", gpu::device_name().c_str());
    std::uint64_t bad = mismatches<std::uint8_t>(emu::e4m3, "rne", 1) + mismatches<std::uint16_t>(emu::bf16, "rne", 1) +
                        mismatches<std::uint8_t>(emu::e2m1, "rne", 1);
    for (const char* mode : {"rna", "rtz", "up", "down", "odd", "sr", "sr:5"})
        bad += mismatches<std::uint8_t>(emu::e4m3, mode, 16) + mismatches<std::uint16_t>(emu::bf16, mode, 16);
    // the Hopper kernel's pair cast (cvt.rn.satfinite.bf16x2.f32) against the function the simulated
    // GPU and the emulator use in its place
    // and the FP8 Hopper kernel's cast of P (two cvt.rn.satfinite.e4m3x2.f32)
    const std::pair<const char*, gpu::ConvertCheck> casts[] = {
        {"cvt.rn.satfinite.bf16x2.f32", gpu::bf16x2_satfinite_check()},
        {"cvt.rn.satfinite.e4m3x2.f32 (four E4M3)", gpu::e4m3x4_satfinite_check()}};
    for (const auto& [name, check] : casts) {
        std::printf("%s: %llu mismatches", name, static_cast<unsigned long long>(check.mismatches));
        if (check.mismatches != 0) std::printf(" (the first at input 0x%08x)", static_cast<unsigned>(check.first));
        std::printf("\n");
        bad += check.mismatches;
    }
    std::printf("%s\n", bad == 0 ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return bad == 0 ? 0 : 1;
}
