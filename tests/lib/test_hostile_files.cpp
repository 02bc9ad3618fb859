#include <catch2/catch.hpp>

#include <random>

#include "emu/batch/tensor_decode.hpp"
#include "lib/error.hpp"
#include "lib/npy.hpp"
#include "lib/safetensors.hpp"
#include "tests/lib/hostile_corpus.hpp"

using namespace roundscope;
using roundscope::test::FileKind;

namespace {

TensorFile parse(FileKind kind, std::span<const std::byte> bytes, const std::string& label) {
    if (kind == FileKind::safetensors) return parse_safetensors(bytes, label, nullptr);
    TensorFile f{label, {}, {}};
    f.tensors.push_back(parse_npy(bytes, label, "x", nullptr));
    return f;
}

// A message fit for one line of a terminal: it names the file and holds only printable ASCII.
bool one_printable_line(const std::string& m) {
    return std::all_of(m.begin(), m.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// Parses and, when that succeeds, decodes every tensor: neither may do anything but succeed
// or throw roundscope::Error.
void parse_or_error(FileKind kind, std::span<const std::byte> bytes, const std::string& label) {
    try {
        const TensorFile f = parse(kind, bytes, label);
        for (const Tensor& t : f.tensors) (void)emu::decode_tensor<double>(t, 1);
    } catch (const Error& e) {
        const std::string m = e.what();
        INFO(m);
        REQUIRE(m.starts_with(label + ":"));
        REQUIRE(one_printable_line(m));
    }
}

}  // namespace

TEST_CASE("every hostile file is one Error naming the file and what is wrong", "[hostile]") {
    for (const auto& h : test::hostile_corpus()) {
        const std::string label = h.name + (h.kind == FileKind::safetensors ? ".safetensors" : ".npy");
        INFO(label);
        try {
            parse(h.kind, h.bytes, label);
            FAIL("no error for " << label);
        } catch (const Error& e) {
            const std::string m = e.what();
            INFO(m);
            CHECK(m.starts_with(label + ":"));
            CHECK(m.find(h.expected) != std::string::npos);
            CHECK(one_printable_line(m));
            CHECK(m.size() < 600);
        }
    }
}

TEST_CASE("every truncation of a valid file is an Error, never a crash", "[hostile]") {
    for (FileKind kind : {FileKind::safetensors, FileKind::npy}) {
        const auto image = kind == FileKind::safetensors ? test::valid_safetensors_image() : test::valid_npy_image();
        CHECK_NOTHROW(parse(kind, image, "whole"));
        for (std::size_t n = 0; n < image.size(); ++n) {
            INFO(n);
            CHECK_THROWS_AS(parse(kind, std::span(image).first(n), "cut"), Error);
        }
    }
}

TEST_CASE("random corruptions of valid files parse or give an Error, never anything else", "[hostile]") {
    std::mt19937_64 rng(2026);
    for (FileKind kind : {FileKind::safetensors, FileKind::npy}) {
        const auto image = kind == FileKind::safetensors ? test::valid_safetensors_image() : test::valid_npy_image();
        for (int trial = 0; trial < 20000; ++trial) {
            std::vector<std::byte> bytes = image;
            const int edits = 1 + static_cast<int>(rng() % 4);
            for (int e = 0; e < edits; ++e) {
                // Mostly inside the header, where the parser's decisions are.
                const std::size_t span = rng() % 4 ? std::min<std::size_t>(bytes.size(), 400) : bytes.size();
                bytes[rng() % span] = std::byte(static_cast<unsigned char>(rng()));
            }
            parse_or_error(kind, bytes, "mutant");
        }
    }
}
