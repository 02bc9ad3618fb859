// The tensor-core models against the H100 golden vectors (tests/data/golden/h100, captured by
// the project on real hardware): every output bit of every tile of every distribution, through
// both the scalar engine and the vector GEMM driver. Also the evidence for the sm_90 FP8
// mma.sync model: the alternatives it was chosen over fail on the same data.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <array>
#include <string>

#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tensors.hpp"
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
