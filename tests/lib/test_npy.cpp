#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "lib/error.hpp"
#include "lib/npy.hpp"
#include "tests/lib/npy_image.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;
using roundscope::test::bytes_of;
using roundscope::test::npy_image;
using roundscope::test::random_tensor;
using roundscope::test::same_bits;

TEST_CASE(".npy: every dtype round-trips bit for bit (opaque ml_dtypes types with an explicit dtype)", "[npy]") {
    const std::vector<Shape> shapes{{}, {0}, {5}, {3, 4}, {2, 1, 3, 2}};
    std::uint64_t seed = 100;
    for (const DTypeInfo& d : all_dtypes()) {
        for (const Shape& shape : shapes) {
            const Tensor t = random_tensor("x", d.dtype, shape, seed++);
            const std::vector<std::byte> image = serialize_npy(t);
            CHECK((image.size() - t.bytes().size()) % 64 == 0);  // data aligned as numpy aligns it
            CHECK(image[6] == std::byte{1});
            const std::optional<DType> given = d.numpy.empty() ? std::optional<DType>(d.dtype) : std::nullopt;
            INFO(d.name << " " << shape_string(shape));
            CHECK(same_bits(parse_npy(image, "mem.npy", "x", nullptr, given), t));
        }
    }
}

TEST_CASE(".npy: headers as numpy writes them, every version", "[npy]") {
    const std::vector<float> v{1, 2, 3, 4, 5, 6};
    for (int major : {1, 2, 3}) {
        const auto image = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", bytes_of(v), major);
        const Tensor t = parse_npy(image, "mem.npy", "x", nullptr);
        CHECK(t.dtype() == DType::f32);
        CHECK(t.shape() == Shape{2, 3});
        CHECK(t.bits_at(5) == std::bit_cast<std::uint32_t>(6.0f));
    }
    // Older numpy: 16-byte alignment, Python 2 longs, no trailing comma, double quotes.
    const auto old = npy_image("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6L,)}", bytes_of(v), 1, 16);
    CHECK(parse_npy(old, "mem.npy", "x", nullptr).shape() == Shape{6});
}

TEST_CASE(".npy: big-endian data is swapped and Fortran order is transposed into C order", "[npy]") {
    std::vector<std::uint16_t> be{0x0100, 0x0200, 0x0300};  // 1, 2, 3 stored big-endian
    const Tensor s = parse_npy(npy_image("{'descr': '>u2', 'fortran_order': False, 'shape': (3,), }", bytes_of(be)),
                               "mem.npy", "x", nullptr);
    CHECK(s.bits_at(0) == 1);
    CHECK(s.bits_at(2) == 3);
    // A 2x3 array [[0, 1, 2], [3, 4, 5]] in Fortran order is stored column by column.
    std::vector<std::int32_t> f{0, 3, 1, 4, 2, 5};
    const Tensor t = parse_npy(npy_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", bytes_of(f)),
                               "mem.npy", "x", nullptr);
    for (int i = 0; i < 6; ++i) CHECK(t.bits_at(i) == static_cast<std::uint64_t>(i));
    // And a 3-d one: element (i, j, k) of shape (2, 3, 4) holds 100 i + 10 j + k.
    std::vector<std::int32_t> g(24);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) g[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
    const Tensor u = parse_npy(npy_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", bytes_of(g)),
                               "mem.npy", "x", nullptr);
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k)
                CHECK(u.bits_at(12 * i + 4 * j + k) == static_cast<std::uint64_t>(100 * i + 10 * j + k));
}

TEST_CASE(".npy: an opaque descr without a dtype says how to give it, in the caller's words", "[npy]") {
    const std::vector<std::uint16_t> v{1, 2};
    const auto image = npy_image("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", bytes_of(v));
    CHECK_THROWS_WITH(parse_npy(image, "q.npy", "q", nullptr, std::nullopt, "--dtype"),
                      Catch::Contains("q.npy") && Catch::Contains("give the element type with --dtype"));
    CHECK(parse_npy(image, "q.npy", "q", nullptr, DType::bf16).dtype() == DType::bf16);
    CHECK_THROWS_WITH(parse_npy(image, "q.npy", "q", nullptr, DType::e4m3), Catch::Contains("1 bytes per element"));
    const std::vector<std::uint8_t> fp4{0x03, 0x1F};
    const auto bad = npy_image("{'descr': '|V1', 'fortran_order': False, 'shape': (2,), }", bytes_of(fp4));
    CHECK_THROWS_WITH(parse_npy(bad, "w.npy", "w", nullptr, DType::e2m1),
                      Catch::Contains("element 1 has bits set above"));
}
