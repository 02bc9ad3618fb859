// The tensor-core models against the H100 golden vectors (tests/data/golden/h100, captured by
// the project on real hardware): every output bit of every tile of every distribution, through
// both the scalar engine and the vector GEMM driver. Also the evidence for the sm_90 FP8
// mma.sync model: the alternatives it was chosen over fail on the same data.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <string>

#include "emu/batch/conversion_digest.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tensors.hpp"
#include "emu/mma/mma_tiles.hpp"
#include "lib/tensor_io.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

std::string golden_path(const std::string& name) {
    return std::string(ROUNDSCOPE_TEST_DATA) + "/golden/h100/mma_" + name + ".safetensors";
}

struct Mismatches {
    std::array<std::int64_t, 10> per_dist{};
    std::int64_t total = 0;
};

Mismatches compare(const MmaProblem& p, const std::vector<std::uint32_t>& d) {
    Mismatches out;
    const std::int64_t per_tile = p.m * p.n;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (d[i] == (*p.d)[i]) continue;
        ++out.total;
        ++out.per_dist.at(p.dist.at(i / static_cast<std::size_t>(per_tile)));
    }
    return out;
}

Mismatches run(const MmaModel& model, const MmaProblem& p, bool reference) {
    std::vector<std::uint32_t> d(p.c.size());
    if (reference) {
        mma_gemm_reference(model, p.operands(d.data()), 0);
    } else {
        mma_gemm(model, p.operands(d.data()), 0);
    }
    return compare(p, d);
}

}  // namespace

TEST_CASE("sm90 mma.sync models reproduce every H100 golden output", "[mma][golden]") {
    const std::string name = GENERATE("bf16", "fp16", "e4m3", "e5m2");
    const TensorFile file = read_tensor_file(golden_path(name));
    const MmaProblem p = load_mma_problem(file, "sm90", "mma.sync");
    REQUIRE(p.d.has_value());
    REQUIRE(p.batch == 2560);
    REQUIRE(p.dist.size() == 2560);
    INFO(name << ": " << mma_model_name(*p.model));
    for (const bool reference : {true, false}) {
        const Mismatches bad = run(*p.model, p, reference);
        INFO((reference ? "scalar engine" : "vector GEMM")
             << " mismatches per distribution: " << fmt::format("{}", fmt::join(bad.per_dist, " ")));
        CHECK(bad.total == 0);
    }
}

TEST_CASE("The sm90 FP8 mma.sync data rule out the models it was chosen over", "[mma][golden]") {
    const std::string name = GENERATE("e4m3", "e5m2");
    const TensorFile file = read_tensor_file(golden_path(name));
    const MmaProblem p = load_mma_problem(file, "sm90", "mma.sync");
    const MmaModel found = *p.model;

    MmaModel wgmma = *find_mma_model("sm90", "wgmma", found.a, found.b, f32);  // L = 32, F = 13, e8m13
    MmaModel one_block = found;  // all 32 products in one block, C added after
    one_block.block_length = 32;
    one_block.k_order = KOrder::sequential;
    MmaModel c_first = found;  // the interleaved blocks, but C entering the first one
    c_first.c_entry = AccumulatorEntry::first_block;
    MmaModel halves = found;  // two blocks of 16 in k order instead of interleaved pairs
    halves.block_length = 16;
    halves.k_order = KOrder::sequential;
    for (const MmaModel* alternative : {&wgmma, &one_block, &c_first, &halves}) {
        const Mismatches bad = run(*alternative, p, false);
        INFO(name << ": mismatches per distribution " << fmt::format("{}", fmt::join(bad.per_dist, " ")));
        CHECK(bad.total > 1000);
    }
}

namespace {

// tools/gpu/trim_probe.py's digests of one tile: its elements' conversion_mix by index.
std::uint64_t tile_digest(const std::uint32_t* x, std::int64_t count, std::uint32_t base) {
    std::uint64_t sum = 0;
    for (std::int64_t i = 0; i < count; ++i) sum += conversion_mix(base + static_cast<std::uint32_t>(i), x[i]);
    return sum;
}

std::vector<std::uint64_t> u64s(const Tensor& t) {
    std::vector<std::uint64_t> out(t.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.bits_at(i);
    return out;
}

}  // namespace

namespace {

// Every tile of a trimmed probe file: the raw ones, then all of them through their digests, the
// inputs made again from the capture's seed (scale-d = 0 captures record C as +0).
void check_every_tile(const std::string& path) {
    const TensorFile file = read_tensor_file(path);
    const MmaProblem raw = load_mma_problem(file, "sm90", "");
    INFO(path << ": " << mma_model_name(*raw.model));
    CHECK(run(*raw.model, raw, false).total == 0);

    const std::vector<std::uint64_t> want_inputs = u64s(file.get("tile_digest_inputs"));
    const std::vector<std::uint64_t> want_d = u64s(file.get("tile_digest_d"));
    MmaTiles t = generate_mma_tiles(*raw.model, raw.m, raw.n, raw.k, std::stoll(file.metadata.at("per_distribution")),
                                    std::stoull(file.metadata.at("seed")));
    if (file.metadata.count("scale_d") != 0) std::fill(t.c.begin(), t.c.end(), 0u);
    REQUIRE(t.tiles == 2560);
    REQUIRE(want_d.size() == 2560);
    std::vector<std::uint32_t> d(t.c.size());
    mma_gemm(*raw.model, GemmOperands{t.a.data(), t.b.data(), t.c.data(), d.data(), t.tiles, raw.m, raw.n, raw.k}, 0);
    const std::int64_t sa = raw.m * raw.k, sb = raw.k * raw.n, sc = raw.m * raw.n;
    std::int64_t inputs_differ = 0, d_differ = 0;
    for (std::int64_t i = 0; i < t.tiles; ++i) {
        const std::uint64_t in = tile_digest(&t.a[i * sa], sa, 0) + tile_digest(&t.b[i * sb], sb, 1u << 30) +
                                 tile_digest(&t.c[i * sc], sc, 1u << 31);
        inputs_differ += in != want_inputs[i];
        d_differ += tile_digest(&d[i * sc], sc, 0) != want_d[i];
    }
    INFO("tiles whose inputs differ from the capture's (the tile generator changed): " << inputs_differ);
    REQUIRE(inputs_differ == 0);
    CHECK(d_differ == 0);
    // The digest sees one bit: the last output's lowest bit flipped changes its tile's.
    d.back() ^= 1u;
    CHECK(tile_digest(&d[(t.tiles - 1) * sc], sc, 0) != want_d.back());
}

}  // namespace

TEST_CASE("sm90 mma.sync and wgmma models reproduce every tile of the 2026-11-27 H100 probe", "[mma][golden]") {
    // tests/data/golden/h100/probe: 80 raw tiles a file (roundscope check reads those) and the
    // digests of all 2560.
    const std::string name =
        GENERATE("mma_bf16", "mma_fp16", "mma_e4m3", "mma_e5m2", "wgmma_rs_bf16", "wgmma_rs_fp16", "wgmma_rs_e4m3",
                 "wgmma_rs_e5m2", "wgmma_ss_bf16", "wgmma_ss_fp16", "wgmma_ss_e4m3", "wgmma_ss_e5m2");
    check_every_tile(std::string(ROUNDSCOPE_TEST_DATA) + "/golden/h100/probe/" + name + ".safetensors");
}

TEST_CASE("sm90 tf32, float16-accumulator and scale-d = 0 models reproduce every tile of the H200 probe",
          "[mma][golden]") {
    // tests/data/golden/h200/probe (2026-11-27, an H200, sm_90 like the H100): the published
    // tf32 and float16-accumulator models, and wgmma with scale-d = 0 against C = +0.
    const std::string name = GENERATE("mma_tf32", "mma_fp16_acc_f16", "wgmma_rs_tf32", "wgmma_ss_tf32",
                                      "wgmma_rs_fp16_acc_f16", "wgmma_ss_fp16_acc_f16", "wgmma_ss_e4m3_acc_f16",
                                      "wgmma_ss_e5m2_acc_f16", "wgmma_ss_bf16_scale_d0", "wgmma_ss_e4m3_scale_d0");
    check_every_tile(std::string(ROUNDSCOPE_TEST_DATA) + "/golden/h200/probe/" + name + ".safetensors");
}
