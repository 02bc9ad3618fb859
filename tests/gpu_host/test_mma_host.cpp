// Property: the mma.sync probe kernel of gpu/, on the simulated GPU, gives the tensor-core
// model's bits on the probe's tiles of all ten distributions, for every input type and every
// architecture with an mma.sync model for it. The simulated warp rebuilds A, B and C from the
// 32 lanes' registers by the PTX ISA's fragment tables (gpu/host/simt_host.cpp), written apart
// from the kernel's loaders (gpu/primitives/mma_sync.cuh): a loader that puts one element in the wrong
// register or lane gives other bits.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_model.hpp"
#include "emu/mma/mma_tiles.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/probes/mma_probe_host.hpp"

using namespace roundscope;

namespace {

// Every (architecture, input) with an mma.sync model, `per_distribution` tiles of each of the ten
// distributions; returns the number of models checked.
int check_models(int per_distribution) {
    int models = 0;
    for (const char* arch : {"sm80", "sm89", "sm90", "sm100"}) {
        for (const emu::Format* f : {&emu::bf16, &emu::f16, &emu::e4m3, &emu::e5m2}) {
            const emu::MmaModel* model = emu::find_mma_model(arch, "mma.sync", *f, *f, emu::f32);
            if (model == nullptr || model->instruction != "mma.sync") continue;
            gpu::simt::set_simulated_architecture(arch);
            const int k = f->bits == 8 ? 32 : 16;
            const emu::MmaTiles t = emu::generate_mma_tiles(*model, 16, 8, k, per_distribution, 3);
            const std::vector<std::uint32_t> d = gpu::simt::run_mma_sync_probe(*f, t.a, t.b, t.c, t.tiles);
            std::vector<std::uint32_t> want(d.size());
            emu::mma_gemm_reference(
                *model, emu::GemmOperands{t.a.data(), t.b.data(), t.c.data(), want.data(), t.tiles, 16, 8, k});
            std::size_t differ = 0;
            for (std::size_t i = 0; i < d.size(); ++i) differ += d[i] != want[i];
            INFO(emu::mma_model_name(*model) << ": " << differ << " of " << d.size() << " outputs differ");
            CHECK(differ == 0);
            ++models;
        }
    }
    gpu::simt::set_simulated_architecture("sm90");
    return models;
}

}  // namespace

TEST_CASE("simulated GPU mma.sync probe equals the models", "[gpu-host]") { REQUIRE(check_models(8) >= 8); }

// One tile per distribution: what the sanitizer builds run (each tile is a block of 32 threads).
TEST_CASE("simulated GPU mma.sync probe, the sanitizers' set", "[gpu-host][sanitized]") {
    REQUIRE(check_models(1) >= 8);
}
