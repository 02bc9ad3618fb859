// The probe's tile generator: reproducible, every distribution what its name says, and the
// "easy" tiles exact, so that a probe whose layout is wrong shows it at once.
#include <catch2/catch.hpp>

#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_tiles.hpp"
#include "emu/numbers/unpack.hpp"

using namespace roundscope;
using namespace roundscope::emu;

TEST_CASE("Probe tiles: reproducible, and each distribution as named", "[mma][tiles]") {
    const Format& in = GENERATE(bf16, f16, e4m3, e5m2);
    const MmaModel& model = *find_mma_model("sm90", "mma.sync", in, in, f32);
    const std::int64_t m = 16, n = 8, k = model.k, per = 8;
    const MmaTiles t = generate_mma_tiles(model, m, n, k, per, 1);
    INFO(in.name);
    REQUIRE(t.tiles == 10 * per);
    REQUIRE(t.a.size() == static_cast<std::size_t>(t.tiles * m * k));
    CHECK(generate_mma_tiles(model, m, n, k, per, 1).a == t.a);
    CHECK(generate_mma_tiles(model, m, n, k, per, 2).a != t.a);

    auto count = [&](int dist, ValueClass cls, bool subnormal) {
        std::int64_t found = 0;
        for (std::int64_t tile = 0; tile < t.tiles; ++tile) {
            if (t.dist[static_cast<std::size_t>(tile)] != dist) continue;
            for (std::int64_t i = 0; i < m * k; ++i) {
                const Unpacked x = unpack(in, t.a[static_cast<std::size_t>(tile * m * k + i)]);
                found += x.cls == cls && x.subnormal == subnormal;
            }
        }
        return found;
    };
    CHECK(count(6, ValueClass::nan, false) > 0);
    CHECK(count(4, ValueClass::finite, true) > 0);
    CHECK(count(9, ValueClass::finite, true) > 0);
    CHECK(count(0, ValueClass::nan, false) + count(1, ValueClass::nan, false) + count(2, ValueClass::nan, false) == 0);

    // Easy tiles are small integers: D is the exact sum, whatever the model's rounding.
    std::vector<std::uint32_t> d(t.c.size());
    mma_gemm(model, GemmOperands{t.a.data(), t.b.data(), t.c.data(), d.data(), t.tiles, m, n, k});
    for (std::int64_t tile = 0; tile < per; ++tile) {
        REQUIRE(t.dist[static_cast<std::size_t>(tile)] == 0);
        for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
                double exact = decode(f32, t.c[static_cast<std::size_t>((tile * m + i) * n + j)]);
                for (std::int64_t kk = 0; kk < k; ++kk) {
                    exact += decode(in, t.a[static_cast<std::size_t>((tile * m + i) * k + kk)]) *
                             decode(in, t.b[static_cast<std::size_t>((tile * k + kk) * n + j)]);
                }
                CHECK(decode(f32, d[static_cast<std::size_t>((tile * m + i) * n + j)]) == exact);
            }
        }
    }
}
