// Fits a model to each MUFU capture (mufu_fitting.hpp) and checks it against every chunk digest,
// i.e. all 2^32 inputs; writes the models and a JSON summary.
//
//   mufu_fit CAPTURE.safetensors... [--models DIR] [--json FILE] [--threads N] [--pack FILE]
//     --pack  the exact models of the ftz exp2, log2 and reciprocal (what the emulator evaluates;
//             the non-ftz variants add only the guards) as one pack (emu/mufu/mufu_pack.hpp), the
//             form emu/mufu/h100_mufu.pack is built in; refused unless all three are exact
// Exit 0 when every capture has a model exact on all 2^32 inputs, 1 when one has not (the
// failing chunks are listed as input ranges), 2 on bad arguments or an unreadable capture.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "emu/mufu/mufu_pack.hpp"
#include "lib/error.hpp"
#include "lib/file_write.hpp"
#include "lib/safetensors.hpp"
#include "tools/gpu/mufu/mufu_fitting.hpp"

using namespace roundscope;

namespace {

struct Options {
    std::vector<std::string> captures;
    std::string models, json, pack;
    int threads = 0;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "mufu_fit: %s\nusage: mufu_fit CAPTURE.safetensors... [--models DIR] [--json FILE] [--threads N]\n",
                 why.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--models" || a == "--json" || a == "--threads" || a == "--pack") && i + 1 < argc) {
            const std::string value = argv[++i];
            if (a == "--pack") o.pack = value;
            if (a == "--models") o.models = value;
            if (a == "--json") o.json = value;
            if (a == "--threads") o.threads = std::atoi(value.c_str());
        } else if (a.rfind("--", 0) == 0) {
            usage("unknown or incomplete option '" + a + "'");
        } else {
            o.captures.push_back(a);
        }
    }
    if (o.captures.empty()) usage("no capture given");
    return o;
}

std::string hex(std::size_t v) {
    char s[16];
    std::snprintf(s, sizeof s, "0x%08zX", v);
    return s;
}

// Consecutive failing chunks as input ranges "0x7F800000-0x7F81FFFF".
std::vector<std::string> ranges(const std::vector<std::size_t>& chunks) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < chunks.size();) {
        std::size_t j = i;
        while (j + 1 < chunks.size() && chunks[j + 1] == chunks[j] + 1) ++j;
        out.push_back(hex(chunks[i] << gpu::mufu_chunk_bits) + "-" +
                      hex(((chunks[j] + 1) << gpu::mufu_chunk_bits) - 1));
        i = j + 1;
    }
    return out;
}

void write_model(const std::string& dir, const gpu::MufuModel& m, const gpu::MufuCapture& c) {
    std::filesystem::create_directories(dir);
    std::map<std::string, std::string> metadata = c.metadata;
    metadata["variant"] = std::string(gpu::mufu_ptx(m.variant));
    metadata["model"] = m.describe();
    metadata["rounding"] = std::string(gpu::fixed_rounding_name(m.rounding));
    metadata["fraction_bits"] = std::to_string(m.fraction_bits);
    metadata["canonical_nan"] = m.canonical_nan ? "true" : "false";
    metadata["split"] = std::to_string(m.split);
    metadata["beyond"] = m.beyond ? "true" : "false";
    metadata["at_one"] = std::to_string(m.at_one);  // float32 bits
    std::vector<Tensor> table{Tensor::of_bits("table", DType::u32, {m.table.size()}, m.table)};
    if (!m.table_positive.empty())
        table.push_back(Tensor::of_bits("table_positive", DType::u32, {m.table_positive.size()}, m.table_positive));
    write_safetensors(dir + "/" + std::string(gpu::mufu_ptx(m.variant)) + ".model.safetensors", table, metadata);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    nlohmann::json summary = nlohmann::json::array();
    bool all_exact = true;
    emu::MufuPack pack;
    for (const std::string& path : o.captures) {
        gpu::MufuCapture c;
        try {
            c = gpu::read_mufu_capture(path);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "mufu_fit: %s\n", e.what());
            return 2;
        }
        const gpu::MufuFit fit = gpu::fit_mufu_model(c, o.threads);
        const std::string name(gpu::mufu_ptx(c.variant));
        nlohmann::json entry{{"variant", name},
                             {"capture", path},
                             {"unit", c.metadata.count("unit") ? c.metadata.at("unit") : "unknown"},
                             {"log", fit.log},
                             {"chunks", gpu::mufu_chunks}};
        std::printf("%s (%s):\n", name.c_str(), path.c_str());
        for (const std::string& line : fit.log) std::printf("  %s\n", line.c_str());
        if (!fit.model) {
            entry["model"] = nullptr, entry["exact_chunks"] = 0;
            all_exact = false;
        } else {
            const std::vector<std::size_t> failing = gpu::failing_chunks(*fit.model, c.digests, o.threads);
            entry["model"] = fit.model->describe();
            entry["exact_chunks"] = gpu::mufu_chunks - failing.size();
            entry["failing_ranges"] = ranges(failing);
            std::printf("  model: %s\n  %zu of %zu chunks exact (all 2^32 inputs: %s)\n", fit.model->describe().c_str(),
                        gpu::mufu_chunks - failing.size(), gpu::mufu_chunks,
                        failing.empty() ? "bit-exact" : "NOT exact");
            for (const std::string& r : ranges(failing)) std::printf("  differs in %s\n", r.c_str());
            all_exact = all_exact && failing.empty();
            if (!o.models.empty()) write_model(o.models, *fit.model, c);
            const bool packed = c.variant == gpu::MufuVariant::ex2_ftz || c.variant == gpu::MufuVariant::lg2_ftz ||
                                c.variant == gpu::MufuVariant::rcp_ftz;
            if (packed && failing.empty()) {
                pack.models.push_back(*fit.model);
                for (const char* key : {"device", "compute_capability", "cuda_driver", "cuda_runtime", "cuda_compiler"})
                    if (c.metadata.count(key)) pack.provenance[key] = c.metadata.at(key);
                pack.provenance[name + ".capture"] = std::filesystem::path(path).filename().string();
            }
        }
        summary.push_back(entry);
    }
    if (!o.json.empty()) write_text(o.json, summary.dump(2) + "\n");
    if (!o.pack.empty()) {
        if (pack.models.size() != 3) {
            std::fprintf(stderr,
                         "mufu_fit: --pack needs exact models of ex2.approx.ftz.f32, lg2.approx.ftz.f32 and "
                         "rcp.approx.ftz.f32\n");
            return 1;
        }
        const std::vector<unsigned char> bytes = emu::pack_mufu_models(pack);
        write_text(o.pack, std::string(bytes.begin(), bytes.end()));
        std::printf("pack: %zu bytes -> %s\n", bytes.size(), o.pack.c_str());
    }
    return all_exact ? 0 : 1;
}
