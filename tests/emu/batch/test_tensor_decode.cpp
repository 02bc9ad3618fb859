#include <catch2/catch.hpp>

#include <cstring>

#include "emu/batch/tensor_decode.hpp"
#include "emu/numbers/unpack.hpp"
#include "tests/lib/tensor_samples.hpp"

using namespace roundscope;

namespace {

// The value of one element, written out per kind: the reference for the batch decoder.
double element_value(const Tensor& t, std::uint64_t i) {
    const std::uint64_t bits = t.bits_at(i);
    const DTypeInfo& d = info(t.dtype());
    switch (d.kind) {
        case DTypeKind::boolean:
            return bits != 0;
        case DTypeKind::unsigned_integer:
            return static_cast<double>(bits);
        case DTypeKind::signed_integer: {
            const int shift = 64 - 8 * d.storage_bytes;
            return static_cast<double>(static_cast<std::int64_t>(bits << shift) >> shift);
        }
        case DTypeKind::floating:
            return emu::decode(emu::format_of(t.dtype()), bits);
    }
    return 0;
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

}  // namespace

TEST_CASE("decode_tensor gives every element's exact value for every dtype, on unaligned views and any thread count",
          "[tensor_decode]") {
    for (const DTypeInfo& d : all_dtypes()) {
        const Tensor owned = test::random_tensor("x", d.dtype, {70001}, 11);
        // The same bytes one byte off alignment, as tensor data in a file can be.
        auto buffer = std::make_shared<std::vector<std::byte>>(owned.bytes().size() + 1);
        std::memcpy(buffer->data() + 1, owned.bytes().data(), owned.bytes().size());
        const Tensor view = Tensor::view("x", d.dtype, owned.shape(), std::span(*buffer).subspan(1), buffer);
        const auto one = emu::decode_tensor<double>(view, 1);
        const auto two = emu::decode_tensor<double>(view, 2);
        INFO(d.name);
        for (std::uint64_t i = 0; i < owned.size(); ++i) {
            REQUIRE(same(one[i], element_value(owned, i)));
            REQUIRE(same(two[i], one[i]));
        }
        const auto f = emu::decode_tensor<float>(view, 2);
        for (std::uint64_t i = 0; i < owned.size(); i += 97) REQUIRE(same(f[i], static_cast<float>(one[i])));
    }
}
