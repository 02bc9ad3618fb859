#include <catch2/catch.hpp>

#include <vector>

#include "lib/philox.hpp"
#include "lib/philox_batch.hpp"

using namespace roundscope;

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST_CASE("philox4x32_10 reproduces the Random123 known-answer vectors", "[philox]") {
    CHECK(philox4x32_10({0, 0, 0, 0}, 0, 0) == PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff) ==
          PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0) ==
          PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("SIMD Philox words equal the scalar stream at any offset, length and draw", "[philox]") {
    const std::uint64_t seed = 0x0123456789abcdefULL;
    for (std::uint64_t first : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{1000003},
                                (std::uint64_t{1} << 32) * 4 - 37}) {  // the last crosses a carry into the high word
        for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{64}, std::size_t{1031}}) {
            for (std::uint32_t k : {0u, 1u, 7u}) {
                std::vector<std::uint32_t> words(n);
                philox_words(seed, first, n, k, words.data());
                for (std::size_t i = 0; i < n; ++i) REQUIRE(words[i] == (RandomStream{seed, first + i}.word(k)));
            }
        }
    }
}
