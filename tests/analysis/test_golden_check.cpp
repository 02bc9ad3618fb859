// Property: a file of none of the golden kinds is not golden; digests of the wrong size and
// tiles without an architecture are refused before any check. The digests' own check sweeps
// every float32 and lives with the exhaustive tests (test_golden_digests.cpp).
#include <catch2/catch.hpp>

#include "analysis/golden_check.hpp"
#include "lib/error.hpp"
#include "tests/analysis/digest_file.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

using test::digest_file;

TEST_CASE("files of no golden kind, and digests of the wrong size", "[golden]") {
    const TensorFile plain{"x.safetensors", {}, {Tensor::zeros("x", DType::f32, {4})}};
    CHECK(!golden_kind(plain).has_value());
    const TensorFile short_digests = digest_file(std::vector<std::uint64_t>(255, 0));
    REQUIRE(golden_kind(short_digests) == GoldenKind::conversion_digests);
    CHECK_THROWS_WITH(validate_golden(short_digests, GoldenKind::conversion_digests),
                      Catch::Contains("'e4m3_gpu'") && Catch::Contains("256 u64 digests"));
    const TensorFile no_arch{"mma.safetensors",
                             {{"instruction", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"}},
                             {Tensor::zeros("A", DType::e4m3, {1, 16, 32}), Tensor::zeros("B", DType::e4m3, {1, 32, 8}),
                              Tensor::zeros("D", DType::f32, {1, 16, 8})}};
    REQUIRE(golden_kind(no_arch) == GoldenKind::mma_tiles);
    CHECK_THROWS_WITH(validate_golden(no_arch, GoldenKind::mma_tiles), Catch::Contains("no architecture"));
}
