#include <catch2/catch.hpp>

#include <cstring>

#include <nlohmann/json.hpp>

#include "lib/bit_packing.hpp"
#include "lib/error.hpp"
#include "lib/safetensors.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;
using roundscope::test::random_tensor;
using roundscope::test::same_bits;

namespace {
nlohmann::json header_of(const std::vector<std::byte>& image) {
    std::uint64_t n = 0;
    std::memcpy(&n, image.data(), 8);
    return nlohmann::json::parse(std::string(reinterpret_cast<const char*>(image.data()) + 8, n));
}
}  // namespace

TEST_CASE("safetensors: every dtype round-trips bit for bit, in shapes of every rank", "[safetensors]") {
    const std::vector<Shape> shapes{{}, {0}, {7}, {3, 4}, {2, 3, 4}, {1, 2, 2, 6}, {5, 0, 3}};
    std::uint64_t seed = 1;
    for (const DTypeInfo& d : all_dtypes()) {
        std::vector<Tensor> tensors;
        for (std::size_t s = 0; s < shapes.size(); ++s)
            tensors.push_back(random_tensor(std::string(d.name) + "_" + std::to_string(s), d.dtype, shapes[s], seed++));
        const std::vector<std::byte> image = serialize_safetensors(tensors, {{"step", "12"}});
        const TensorFile back = parse_safetensors(image, "mem.safetensors", nullptr);
        REQUIRE(back.tensors.size() == tensors.size());
        for (const Tensor& t : tensors) {
            INFO(t.name());
            REQUIRE(back.find(t.name()));
            CHECK(same_bits(*back.find(t.name()), t));
        }
        CHECK(back.metadata.at("step") == "12");
    }
}

TEST_CASE("safetensors: native dtypes are written as such, others as U8 with their format in metadata",
          "[safetensors]") {
    const std::vector<Tensor> tensors{
        random_tensor("p", DType::e2m1, {2, 4}, 1), random_tensor("odd", DType::e2m1, {3}, 2),
        random_tensor("s", DType::ue4m3, {4}, 3),   random_tensor("m", DType::mxint8, {4}, 4),
        random_tensor("six", DType::e2m3, {8}, 5),  random_tensor("b", DType::bf16, {3}, 6)};
    const auto image = serialize_safetensors(tensors);
    const nlohmann::json h = header_of(image);
    CHECK(h["p"]["dtype"] == "F4");
    CHECK(h["p"]["data_offsets"][1].get<int>() - h["p"]["data_offsets"][0].get<int>() == 4);  // 8 x 4 bits
    CHECK(h["six"]["dtype"] == "F6_E2M3");
    CHECK(h["six"]["data_offsets"][1].get<int>() - h["six"]["data_offsets"][0].get<int>() == 6);  // 8 x 6 bits
    CHECK(h["odd"]["dtype"] == "U8");  // 3 x 4 bits is not whole bytes
    CHECK(h["__metadata__"]["roundscope.format.odd"] == "e2m1");
    CHECK(h["s"]["dtype"] == "U8");
    CHECK(h["__metadata__"]["roundscope.format.s"] == "ue4m3");
    CHECK(h["__metadata__"]["roundscope.format.m"] == "int8");
    CHECK(h["b"]["dtype"] == "BF16");
    // Header padded to 8 bytes and widest elements first: every tensor's data is aligned.
    std::uint64_t n = 0;
    std::memcpy(&n, image.data(), 8);
    CHECK(n % 8 == 0);
    CHECK(h["b"]["data_offsets"][0] == 0);
}

TEST_CASE("safetensors: F4 is packed low nibble first, as PyTorch's float4_e2m1fn_x2", "[safetensors]") {
    Tensor t = Tensor::zeros("x", DType::e2m1, {4});
    for (int i = 0; i < 4; ++i) t.set_bits_at(i, i + 1);  // 1, 2, 3, 4
    const auto image = serialize_safetensors(std::vector<Tensor>{t});
    const std::byte* data = image.data() + image.size() - 2;
    CHECK(data[0] == std::byte{0x21});
    CHECK(data[1] == std::byte{0x43});
}

TEST_CASE("bit packing: unpack inverts pack for 4- and 6-bit elements", "[safetensors]") {
    for (int bits : {4, 6}) {
        std::vector<std::byte> values(24);
        for (std::size_t i = 0; i < values.size(); ++i)
            values[i] = std::byte(static_cast<unsigned char>((i * 37 + 5) % (1u << bits)));
        const auto packed = pack_bits(values, bits);
        CHECK(packed.size() == values.size() * bits / 8);
        CHECK(unpack_bits(packed, values.size(), bits) == values);
    }
}

TEST_CASE("safetensors: the reader's tensors view the file image without copying", "[safetensors]") {
    const std::vector<Tensor> tensors{random_tensor("q", DType::bf16, {4, 8}, 9)};
    const auto image = serialize_safetensors(tensors);
    const TensorFile f = parse_safetensors(image, "mem", nullptr);
    CHECK(f.tensors[0].is_view());
    CHECK(f.tensors[0].bytes().data() >= image.data());
    CHECK(f.tensors[0].bytes().data() < image.data() + image.size());
}

TEST_CASE("safetensors: writing rejects duplicate and reserved names", "[safetensors]") {
    const std::vector<Tensor> twice{random_tensor("a", DType::u8, {1}, 1), random_tensor("a", DType::u8, {1}, 2)};
    CHECK_THROWS_WITH(serialize_safetensors(twice), Catch::Contains("'a' given twice"));
    const std::vector<Tensor> reserved{random_tensor("__metadata__", DType::u8, {1}, 1)};
    CHECK_THROWS_AS(serialize_safetensors(reserved), Error);
}
