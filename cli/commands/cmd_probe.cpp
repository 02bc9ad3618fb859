// `roundscope probe --out DIR [--tiles N] [--seed S]`: captures golden vectors on the local GPU
// in the format of tests/data/golden (docs/golden-vectors.md): MMA tiles of the ten distributions for
// mma.sync and, on sm_90, wgmma with A from registers and from shared memory; and digests of
// the float32 -> bf16 / f16 / e4m3 / e5m2 conversions over all 2^32 inputs. Each file is then
// checked against roundscope's model of this architecture and the verdict printed; the files
// serve `roundscope mma FILE --check` later, on any machine. Exit 3 without a GPU.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "cli/option_checks.hpp"
#include "emu/batch/conversion_digest.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tiles.hpp"
#include "emu/numbers/cast_options.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/tensor_io.hpp"
#if ROUNDSCOPE_WITH_GPU
#include "gpu/device.hpp"
#include "gpu/probes/mma_probe.hpp"
#endif

namespace roundscope::cli {
namespace {

struct ProbeOptions {
    std::string out;
    std::int64_t tiles = 256;  // per distribution, as in tests/data/golden
    std::uint64_t seed = 1;
};

#if ROUNDSCOPE_WITH_GPU

Tensor bits_tensor(const std::string& name, DType dtype, Shape shape, const std::vector<std::uint32_t>& bits) {
    Tensor t = Tensor::zeros(name, dtype, std::move(shape));
    for (std::size_t i = 0; i < bits.size(); ++i) t.set_bits_at(i, bits[i]);
    return t;
}

// One probed instruction: how to run it, and what the file and the model need to know.
struct ProbeSpec {
    std::string file_name, ptx, instruction;  // instruction: "mma.sync" or "wgmma" (the model's)
    const emu::Format* input;
    const emu::Format* accumulator;
    int rows, k;
    bool scale_d_zero;
    std::function<std::vector<std::uint32_t>(const emu::MmaTiles&)> run;
};

void probe_mma(const ProbeOptions& o, const std::string& device, int cc, const ProbeSpec& p) {
    const std::string arch = gpu::model_arch(cc);
    const emu::MmaModel* model = emu::find_mma_model(arch, p.instruction, *p.input, *p.input, *p.accumulator);
    // The tiles need the formats only; a GPU without a model is still probed.
    const emu::MmaModel* formats =
        model != nullptr ? model : emu::find_mma_model("sm90", p.instruction, *p.input, *p.input, *p.accumulator);
    if (formats == nullptr) throw Error("probe: no model gives the formats of " + p.ptx);
    emu::MmaTiles t = emu::generate_mma_tiles(*formats, p.rows, 8, p.k, o.tiles, o.seed);
    if (p.scale_d_zero) std::fill(t.c.begin(), t.c.end(), 0u);  // C is not read: the file says +0
    const std::vector<std::uint32_t> d = p.run(t);

    const auto T = static_cast<std::uint64_t>(t.tiles), M = static_cast<std::uint64_t>(p.rows),
               K = static_cast<std::uint64_t>(p.k);
    const DType in = emu::dtype_of(*p.input), acc = emu::dtype_of(*p.accumulator);
    std::vector<Tensor> tensors;
    tensors.push_back(bits_tensor("A", in, {T, M, K}, t.a));
    tensors.push_back(bits_tensor("B", in, {T, K, 8}, t.b));
    tensors.push_back(bits_tensor("C", acc, {T, M, 8}, t.c));
    tensors.push_back(bits_tensor("D", acc, {T, M, 8}, d));
    Tensor dist = Tensor::zeros("dist", DType::u8, {T});
    for (std::uint64_t i = 0; i < T; ++i) dist.set_bits_at(i, t.dist[i]);
    tensors.push_back(std::move(dist));
    const std::string path = (std::filesystem::path(o.out) / (p.file_name + ".safetensors")).string();
    std::map<std::string, std::string> metadata{
        {"device", fmt::format("{} (sm_{})", device, cc)},
        {"cuda_compiler", gpu::cuda_compiler()},
        {"cuda_runtime", gpu::cuda_runtime_version()},
        {"cuda_driver", gpu::cuda_driver_version()},
        {"instruction", p.ptx},
        {"layout", "A[t][m][k], B[t][k][n], C/D[t][m][n]; D = A*B + C by the tensor core"},
        {"seed", std::to_string(o.seed)},
        {"dists", emu::tile_distribution_metadata()}};
    if (p.scale_d_zero) metadata["scale_d"] = "0: D = A*B, C not read (recorded as +0)";
    if (*p.input == emu::f32) metadata["inputs"] = "tf32: float32 patterns, the low 13 bits as generated";
    write_output(path, tensors, metadata);

    std::string verdict = "no roundscope model for " + arch;
    if (model != nullptr) {
        std::vector<std::uint32_t> emulated(d.size());
        emu::mma_gemm(*model,
                      emu::GemmOperands{t.a.data(), t.b.data(), t.c.data(), emulated.data(), t.tiles, p.rows, 8, p.k});
        std::size_t matched = 0;
        for (std::size_t i = 0; i < d.size(); ++i) matched += d[i] == emulated[i];
        verdict = fmt::format("{} model: {} of {} outputs match", emu::mma_model_name(*model), matched, d.size());
    }
    fmt::print("{}: {}; {}\n", path, p.ptx, verdict);
}

ProbeSpec basic_spec(gpu::ProbeInstruction instruction, const emu::Format& f, const std::string& file_name) {
    const bool sync = instruction == gpu::ProbeInstruction::mma_sync;
    return {file_name,
            gpu::probe_ptx(instruction, f),
            sync ? "mma.sync" : "wgmma",
            &f,
            &emu::f32,
            gpu::probe_rows(instruction),
            gpu::probe_depth(f),
            false,
            [instruction, &f](const emu::MmaTiles& t) {
                return gpu::run_mma_probe(instruction, f, t.a, t.b, t.c, t.tiles);
            }};
}

ProbeSpec variant_spec(const gpu::ProbeVariant& v) {
    const bool sync = v.instruction == gpu::ProbeInstruction::mma_sync;
    return {v.name,
            gpu::probe_ptx(v),
            sync ? "mma.sync" : "wgmma",
            v.input,
            v.accumulator,
            gpu::probe_rows(v.instruction),
            gpu::probe_depth(v),
            v.scale_d_zero,
            [v](const emu::MmaTiles& t) { return gpu::run_mma_probe(v, t.a, t.b, t.c, t.tiles); }};
}

void probe_conversions(const ProbeOptions& o, const std::string& device, int cc) {
    std::vector<Tensor> tensors;
    for (const emu::Format* f : {&emu::bf16, &emu::f16, &emu::e4m3, &emu::e5m2}) {
        if (f->bits == 8 && cc < 89) continue;
        const emu::CastOptions options = emu::probed_conversion_options(*f);
        const std::vector<std::uint64_t> gpu_digests = gpu::conversion_digests(*f);
        const std::vector<std::uint64_t> emulated = emu::emulated_conversion_digests(*f, options);
        int matched = 0;
        for (std::size_t j = 0; j < gpu_digests.size(); ++j) matched += gpu_digests[j] == emulated[j];
        fmt::print("f32 -> {}: {} of {} chunks of 2^24 inputs match the emulator\n", f->name, matched,
                   gpu_digests.size());
        Tensor g = Tensor::zeros(std::string(f->name) + "_gpu", DType::u64, {gpu_digests.size()});
        Tensor e = Tensor::zeros(std::string(f->name) + "_emulator", DType::u64, {emulated.size()});
        for (std::size_t j = 0; j < gpu_digests.size(); ++j) {
            g.set_bits_at(j, gpu_digests[j]);
            e.set_bits_at(j, emulated[j]);
        }
        tensors.push_back(std::move(g));
        tensors.push_back(std::move(e));
    }
    write_output((std::filesystem::path(o.out) / "conversions.safetensors").string(), tensors,
                 {{"device", fmt::format("{} (sm_{})", device, cc)},
                  {"cuda_compiler", gpu::cuda_compiler()},
                  {"cuda_runtime", gpu::cuda_runtime_version()},
                  {"cuda_driver", gpu::cuda_driver_version()},
                  {"digest", "chunk j: sum mod 2^64 of conversion_mix(x, out) over x in [j 2^24, (j+1) 2^24)"}});
}

void probe(const ProbeOptions& o) {
    const std::string device = gpu::device_name();
    const int cc = gpu::compute_capability();
    if (device.empty() || cc == 0) {
        std::fprintf(stderr, "roundscope: error: probe: no CUDA GPU is usable on this machine\n");
        throw ExitCode{3};
    }
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) throw Error("--out: cannot create '" + o.out + "': " + ec.message());
    check_output("--out", (std::filesystem::path(o.out) / "conversions.safetensors").string(), {});
    for (const emu::Format* f : {&emu::bf16, &emu::f16, &emu::e4m3, &emu::e5m2}) {
        if (f->bits == 8 && cc < 89) continue;
        const std::string type = f->name == "f16" ? "fp16" : std::string(f->name);
        probe_mma(o, device, cc, basic_spec(gpu::ProbeInstruction::mma_sync, *f, "mma_" + type));
        if (cc == 90) {
            probe_mma(o, device, cc, basic_spec(gpu::ProbeInstruction::wgmma_rs, *f, "wgmma_rs_" + type));
            probe_mma(o, device, cc, basic_spec(gpu::ProbeInstruction::wgmma_ss, *f, "wgmma_ss_" + type));
        }
    }
    // tf32 inputs, float16 accumulators, scale-d = 0 (gpu/probes/mma_probe_variants.cu).
    for (const gpu::ProbeVariant& v : gpu::extra_probe_variants(cc)) probe_mma(o, device, cc, variant_spec(v));
    probe_conversions(o, device, cc);
}

#else

void probe(const ProbeOptions&) {
    std::fprintf(stderr,
                 "roundscope: error: probe: this roundscope was built without CUDA (ROUNDSCOPE_CUDA=OFF or no nvcc)\n");
    throw ExitCode{3};
}

#endif

}  // namespace

void add_probe_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("probe", "Capture MMA and conversion golden vectors on the local GPU");
    auto o = std::make_shared<ProbeOptions>();
    cmd->add_option("--out", o->out, "Directory for the .safetensors files")->required();
    cmd->add_option("--tiles", o->tiles, "Tiles per distribution")
        ->check(integer_in(1, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random tiles")->check(seed_value())->capture_default_str();
    cmd->footer(
        "Example: roundscope probe --out h100-vectors && roundscope mma h100-vectors/mma_e4m3.safetensors --check\n");
    cmd->callback([o] { probe(*o); });
}

}  // namespace roundscope::cli
