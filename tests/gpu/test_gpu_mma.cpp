// Property (on a machine with a GPU): the tensor cores give the bits of roundscope's model of
// this architecture, on the probe's tiles of all ten distributions, for every instruction the
// probe runs here (mma.sync; wgmma with A in registers and in shared memory on sm_90), and the
// GPU's float32 -> bf16/f16/e4m3/e5m2 conversions the emulator's over all 2^32 inputs. On sm_90,
// wgmma reads its shared-memory operands where gpu/primitives/wgmma_descriptor.hpp says, with the model's
// bits, in every layout of the layout probe (gpu/probes/wgmma_layout_probe.hpp: N 64 and 128, K-major
// and MN-major, each swizzle, A from registers): those the Hopper kernel uses, one by one.
// Exits 77 (CTest: skipped) where no GPU is usable (1 with ROUNDSCOPE_REQUIRE_GPU=1); a run that
// checked nothing fails.
#include <cstdio>
#include <string>
#include <vector>

#include "emu/batch/conversion_digest.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tiles.hpp"
#include "gpu/probes/mma_probe.hpp"
#include "gpu/probes/wgmma_layout_probe.hpp"
#include "tests/gpu/gpu_or_skip.hpp"
#include "tests/gpu_host/wgmma_reference.hpp"

using namespace roundscope;

int main() {
    const int cc = test::compute_capability_or_skip();
    const std::string arch = gpu::model_arch(cc);
    int checks = 0, failures = 0;
    for (const emu::Format* f : {&emu::bf16, &emu::f16, &emu::e4m3, &emu::e5m2}) {
        if (f->bits == 8 && cc < 89) continue;
        for (const auto instruction :
             {gpu::ProbeInstruction::mma_sync, gpu::ProbeInstruction::wgmma_rs, gpu::ProbeInstruction::wgmma_ss}) {
            if (instruction != gpu::ProbeInstruction::mma_sync && cc != 90) continue;
            const char* name = instruction == gpu::ProbeInstruction::mma_sync ? "mma.sync" : "wgmma";
            const emu::MmaModel* model = emu::find_mma_model(arch, name, *f, *f, emu::f32);
            if (model == nullptr) {
                std::printf("%s: not runnable here (no %s model for %s inputs on %s)\n",
                            gpu::probe_ptx(instruction, *f).c_str(), name, std::string(f->name).c_str(), arch.c_str());
                continue;
            }
            const int rows = gpu::probe_rows(instruction), k = gpu::probe_depth(*f);
            const emu::MmaTiles t = emu::generate_mma_tiles(*model, rows, 8, k, 256, 2);
            const std::vector<std::uint32_t> d = gpu::run_mma_probe(instruction, *f, t.a, t.b, t.c, t.tiles);
            std::vector<std::uint32_t> want(d.size());
            emu::mma_gemm(*model,
                          emu::GemmOperands{t.a.data(), t.b.data(), t.c.data(), want.data(), t.tiles, rows, 8, k});
            std::size_t bad = 0;
            for (std::size_t i = 0; i < d.size(); ++i) bad += d[i] != want[i];
            std::printf("%s: %zu of %zu outputs differ from %s\n", gpu::probe_ptx(instruction, *f).c_str(), bad,
                        d.size(), emu::mma_model_name(*model).c_str());
            failures += bad != 0 || d.empty();
            ++checks;
        }
        emu::CastOptions options = emu::convention_options(emu::Convention::cuda, *f);
        options.saturate = f->bits == 8;
        const bool same = gpu::conversion_digests(*f) == emu::emulated_conversion_digests(*f, options);
        std::printf("f32 -> %s conversion digests: %s\n", std::string(f->name).c_str(), same ? "equal" : "DIFFER");
        failures += !same;
        ++checks;
    }
    if (cc == 90) {
        unsigned seed = 1;
        std::vector<gpu::WgmmaLayoutCase> cases = gpu::wgmma_layout_cases();
        for (const gpu::WgmmaLayoutCase& c : gpu::wgmma_e4m3_layout_cases()) cases.push_back(c);
        for (const gpu::WgmmaLayoutCase& c : cases) {
            const test::WgmmaProblem p = c.e4m3 ? test::random_wgmma_problem_e4m3(c.n, c.k, seed++)
                                                : test::random_wgmma_problem(c.n, c.k, seed++);
            const std::size_t bad =
                test::differing_floats(gpu::run_wgmma_layout_probe(c, p.a, p.b, p.c), test::wgmma_reference(p, true));
            std::printf("wgmma layout %s: %zu of %d outputs differ from the sm90 model\n",
                        gpu::layout_case_name(c).c_str(), bad, 64 * c.n);
            failures += bad != 0;
            ++checks;
        }
    }
    return test::verdict(checks, failures, "model and conversion checks");
}
