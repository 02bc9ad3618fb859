#include "analysis/golden_check.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analysis/kernel_compare.hpp"
#include "emu/attention/recipe/attention_recipe.hpp"
#include "emu/batch/conversion_digest.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tensors.hpp"
#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

std::string metadata(const TensorFile& f, const std::string& key) {
    const auto it = f.metadata.find(key);
    return it == f.metadata.end() ? std::string() : it->second;
}

bool has(const TensorFile& f, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (f.find(n) == nullptr) return false;
    return true;
}

/// The digest formats of a file: the formats F with a tensor F_gpu.
std::vector<const emu::Format*> digest_formats(const TensorFile& file) {
    std::vector<const emu::Format*> formats;
    for (const Tensor& t : file.tensors) {
        const std::string& n = t.name();
        if (n.size() <= 4 || !n.ends_with("_gpu")) continue;
        if (const emu::Format* f = emu::find_format(n.substr(0, n.size() - 4))) formats.push_back(f);
    }
    return formats;
}

/// "sm90" from metadata "arch", or from the device `probe` records ("NVIDIA H100 (sm_90)").
std::string architecture(const TensorFile& file) {
    if (std::string arch = metadata(file, "arch"); !arch.empty()) return arch;
    const std::string device = metadata(file, "device");
    const std::size_t at = device.find("(sm_");
    if (at == std::string::npos) return {};
    const std::size_t end = device.find(')', at);
    return end == std::string::npos ? std::string() : "sm" + device.substr(at + 4, end - at - 4);
}

}  // namespace

CaptureModel capture_model(const TensorFile& file) {
    CaptureModel m{architecture(file), {}};
    const std::string ptx = metadata(file, "instruction");
    if (ptx.starts_with("wgmma"))
        m.instruction = "wgmma";
    else if (ptx.starts_with("mma.sync"))
        m.instruction = "mma.sync";
    else if (!ptx.empty())
        throw Error(file.path + ": metadata \"instruction\" is '" + printable(ptx) +
                    "', neither mma.sync... nor wgmma... (the PTX instruction roundscope probe records)");
    if (!m.arch.empty()) {
        try {
            emu::check_mma_architecture(m.arch);
        } catch (const Error& e) {
            throw Error(file.path + ": metadata: " + e.what());
        }
    }
    return m;
}

namespace {

/// The tiles and the model of their architecture and instruction (capture_model).
emu::MmaProblem load_mma(const TensorFile& file) {
    const CaptureModel m = capture_model(file);
    if (m.arch.empty())
        throw Error(file.path + ": no architecture in the metadata (\"arch\", or \"device\" with (sm_NN) as " +
                    "roundscope probe writes it)");
    emu::MmaProblem p = emu::load_mma_problem(file, m.arch, m.instruction);
    if (!p.d) throw Error(file.path + ": no tensor 'D' (what the GPU computed) to check");
    return p;
}

GoldenCase check_mma_file(const TensorFile& file, int threads) {
    const std::string arch = architecture(file), ptx = metadata(file, "instruction");
    GoldenCase c{.name = fmt::format("{} {}", arch, ptx.empty() ? "mma" : ptx)};
    const emu::MmaProblem p = load_mma(file);
    std::vector<std::uint32_t> d(p.c.size());
    emu::mma_gemm(*p.model, p.operands(d.data()), threads);
    const emu::MmaCheck check = emu::check_mma(p, d, 1);
    c.matched = check.matched, c.total = check.total, c.passed = check.matched == check.total;
    if (!check.first.empty()) {
        const emu::MmaCheck::Mismatch& m = check.first[0];
        c.detail = fmt::format("first difference in tile {} at element {}: file 0x{:08x}, model {} 0x{:08x}", m.tile,
                               m.row * p.n + m.col, m.expected, emu::mma_model_name(*p.model), m.model);
    }
    return c;
}

std::vector<GoldenCase> check_digests(const TensorFile& file, int threads) {
    std::vector<GoldenCase> cases;
    for (const emu::Format* f : digest_formats(file)) {
        GoldenCase c{.name = "f32 -> " + std::string(f->name)};
        const Tensor& gpu = file.get(std::string(f->name) + "_gpu");
        const std::vector<std::uint64_t> emulated =
            emu::emulated_conversion_digests(*f, emu::probed_conversion_options(*f), threads);
        c.total = emulated.size();
        for (std::size_t j = 0; j < emulated.size(); ++j) {
            if (gpu.bits_at(j) == emulated[j]) {
                ++c.matched;
            } else if (c.detail.empty()) {
                c.detail =
                    fmt::format("first differing chunk: inputs 0x{:08x} to 0x{:08x}", j << 24, ((j + 1) << 24) - 1);
            }
        }
        c.passed = c.matched == c.total;
        cases.push_back(c);
    }
    return cases;
}

void check_digest_tensors(const TensorFile& file) {
    for (const emu::Format* f : digest_formats(file)) {
        const Tensor& gpu = file.get(std::string(f->name) + "_gpu");
        if (gpu.dtype() != DType::u64 || gpu.size() != emu::conversion_digest_chunks)
            throw Error(fmt::format("tensor '{}' of {}: expected {} u64 digests", gpu.name(), file.path,
                                    emu::conversion_digest_chunks));
        if (f->bits > 16)
            throw Error(
                fmt::format("tensor '{}' of {}: digests cover formats of 16 bits or fewer", gpu.name(), file.path));
    }
}

/// The recipe the dump names, with its settings ("recipe_settings": a JSON object, as
/// `roundscope attention` writes it).
emu::AttentionRecipe recipe_of(const TensorFile& file) {
    try {
        emu::AttentionRecipe recipe = emu::find_recipe(metadata(file, "recipe"));
        if (const std::string settings = metadata(file, "recipe_settings"); !settings.empty()) {
            const nlohmann::json j = nlohmann::json::parse(settings, nullptr, false);
            if (!j.is_object()) throw Error("recipe_settings is not a JSON object");
            for (const auto& [key, value] : j.items())
                emu::apply_setting(recipe, key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
        }
        emu::validate(recipe);
        return recipe;
    } catch (const Error& e) {
        throw Error(file.path + ": metadata: " + e.what());
    }
}

GoldenCase check_dump(const TensorFile& file, int threads, const DumpTolerance& tolerance) {
    GoldenCase c{.name = "recipe " + metadata(file, "recipe")};
    const emu::AttentionRecipe recipe = recipe_of(file);
    const emu::AttentionInputs in = emu::find_attention_inputs(file);
    AttentionRunOptions options;
    options.causal = in.causal.value_or(false);
    options.scale = in.softmax_scale.value_or(0);
    options.threads = threads;
    const KernelComparison r =
        compare_kernel(file, in, recipe, options, {.tolerance = tolerance.close, .worst_count = 1});
    c.matched = r.matched, c.total = r.total, c.passed = true;
    for (const OutputComparison& o : r.outputs)
        if (const std::string why = output_failure(o, tolerance); !why.empty()) {
            c.passed = false;
            c.detail += (c.detail.empty() ? "" : "; ") + why;
        }
    return c;
}

}  // namespace

std::optional<GoldenKind> golden_kind(const TensorFile& file) {
    if (has(file, {"A", "B", "D"}) && (file.metadata.count("instruction") || file.metadata.count("device")))
        return GoldenKind::mma_tiles;
    if (!digest_formats(file).empty()) return GoldenKind::conversion_digests;
    if (has(file, {"q", "k", "v"}) && file.metadata.count("recipe")) return GoldenKind::attention_dump;
    return std::nullopt;
}

void validate_golden(const TensorFile& file, GoldenKind kind) {
    try {
        switch (kind) {
            case GoldenKind::mma_tiles:
                load_mma(file);
                return;
            case GoldenKind::conversion_digests:
                check_digest_tensors(file);
                return;
            case GoldenKind::attention_dump:
                recipe_of(file);
                emu::find_attention_inputs(file);
                return;
        }
    } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find(file.path) != std::string::npos) throw;
        throw Error(file.path + ": " + what);
    }
}

std::string output_failure(const OutputComparison& o, const DumpTolerance& t) {
    const double share = o.total == 0 ? 1.0 : static_cast<double>(o.matched) / static_cast<double>(o.total);
    const bool pass =
        t.exact() ? o.matched == o.total
                  : (!t.max_ulp || o.max_ulp <= *t.max_ulp) && (!t.max_row_ulp || o.max_row_ulp <= *t.max_row_ulp) &&
                        (!t.min_match || share >= *t.min_match) && (!t.close || o.outside_tolerance.value_or(0) == 0);
    if (pass) return {};
    const std::string max_ulp =
        o.max_ulp == ~std::uint64_t{0} ? "NaN against a number" : fmt::format("{} ulp", o.max_ulp);
    std::string why = fmt::format("{}: {} of {} differ ({:.4f} % equal), max {} ({:.3g} of its row's scale)", o.name,
                                  o.total - o.matched, o.total, 100.0 * share, max_ulp, o.max_row_ulp);
    if (o.outside_tolerance && *o.outside_tolerance > 0)
        why += fmt::format(", {} outside rtol {:g} atol {:g}", *o.outside_tolerance, t.close->rtol, t.close->atol);
    if (o.sign_flips_near_zero > 0) why += fmt::format(", {} sign flip(s) near zero", o.sign_flips_near_zero);
    if (o.nonfinite > 0)
        why += fmt::format(", {} NaN or Inf where the truth is finite (first at {})", o.nonfinite,
                           shape_string(o.first_nonfinite->index));
    if (o.largest_difference) {
        const ElementDifference& d = *o.largest_difference;
        why += fmt::format("; furthest at {}: kernel {} recipe {}", shape_string(d.index), d.kernel, d.emulated);
    }
    return why;
}

std::vector<GoldenCase> check_golden(const TensorFile& file, GoldenKind kind, int threads,
                                     const DumpTolerance& tolerance) {
    switch (kind) {
        case GoldenKind::mma_tiles:
            return {check_mma_file(file, threads)};
        case GoldenKind::conversion_digests:
            return check_digests(file, threads);
        case GoldenKind::attention_dump:
            return {check_dump(file, threads, tolerance)};
    }
    return {};
}

}  // namespace roundscope::analysis
