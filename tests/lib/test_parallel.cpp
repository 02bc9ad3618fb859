#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "lib/parallel.hpp"

using namespace roundscope;

TEST_CASE("parallel_for visits every index exactly once in fixed chunks, on any thread count", "[parallel]") {
    for (int threads : {1, 2, 8}) {
        std::vector<int> hits(100003, 0);
        std::vector<std::pair<std::size_t, std::size_t>> chunks(100);
        parallel_for(hits.size(), 1024, threads, [&](std::size_t b, std::size_t e) {
            chunks[b / 1024] = {b, e};
            for (std::size_t i = b; i < e; ++i) ++hits[i];
        });
        for (int h : hits) REQUIRE(h == 1);
        REQUIRE(chunks[97] == std::make_pair(std::size_t{97 * 1024}, hits.size()));
        for (std::size_t c = 0; c < 97; ++c) REQUIRE(chunks[c] == std::make_pair(c * 1024, (c + 1) * 1024));
    }
}

TEST_CASE("parallel_for rethrows a chunk's exception and nests without deadlock", "[parallel]") {
    CHECK_THROWS_AS(parallel_for(10000, 10, 2,
                                 [](std::size_t b, std::size_t) {
                                     if (b == 500) throw std::runtime_error("chunk failed");
                                 }),
                    std::runtime_error);
    std::atomic<int> total{0};
    parallel_for(8, 1, 2,
                 [&](std::size_t, std::size_t) { parallel_for(10, 1, 2, [&](std::size_t, std::size_t) { ++total; }); });
    CHECK(total == 80);
}
