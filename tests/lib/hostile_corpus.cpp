#include "tests/lib/hostile_corpus.hpp"

#include <cstdint>
#include <cstring>

#include "lib/npy.hpp"
#include "lib/safetensors.hpp"
#include "tests/lib/npy_image.hpp"
#include "tests/lib/tensor_samples.hpp"

namespace roundscope::test {
namespace {

using namespace std::string_literals;

// A safetensors image from a header text and a byte buffer of `buffer` bytes.
std::vector<std::byte> st(const std::string& header, std::size_t buffer, std::uint64_t length = ~std::uint64_t{0}) {
    const std::uint64_t n = length == ~std::uint64_t{0} ? header.size() : length;
    std::vector<std::byte> out(8);
    std::memcpy(out.data(), &n, 8);
    for (char c : header) out.push_back(std::byte(static_cast<unsigned char>(c)));
    for (std::size_t i = 0; i < buffer; ++i) out.push_back(std::byte(static_cast<unsigned char>(i * 7)));
    return out;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

std::vector<std::byte> npy(const std::string& dict, std::size_t data_bytes, int major = 1) {
    return npy_image(dict, std::vector<std::byte>(data_bytes, std::byte{0x3c}), major);
}

std::vector<std::byte> raw(const std::string& s) {
    std::vector<std::byte> out;
    for (char c : s) out.push_back(std::byte(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

std::vector<HostileFile> hostile_corpus() {
    using K = FileKind;
    const std::string ok = entry("a", "F32", "[2]", "[0,8]");
    std::vector<HostileFile> c{
        {"empty", K::safetensors, {}, "truncated"},
        {"shorter_than_length", K::safetensors, raw("\x05\x00\x00"s), "truncated"},
        {"header_length_past_end", K::safetensors, st("{" + ok + "}", 8, 4096), "runs past the end"},
        {"header_length_huge", K::safetensors, st("{}", 0, std::uint64_t{1} << 62), "over the 100 MB limit"},
        {"header_length_just_over_limit", K::safetensors, st("{}", 0, 100'000'001), "over the 100 MB limit"},
        {"invalid_json", K::safetensors, st("{\"a\":{\"dtype\":", 0), "invalid JSON"},
        {"invalid_utf8", K::safetensors, st("{\"\xff\xfe\":{}}", 0), "invalid JSON"},
        {"control_char_in_name", K::safetensors, st("{\"a\x01\":{}}", 0), "invalid JSON"},
        {"not_an_object", K::safetensors, st("[1,2]", 0), "not a JSON object"},
        {"deep_nesting", K::safetensors, st("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0),
         "nests deeper"},
        {"unknown_dtype", K::safetensors, st("{" + entry("a", "F7", "[2]", "[0,8]") + "}", 8), "unknown dtype 'F7'"},
        {"negative_dim", K::safetensors, st("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", 8),
         "non-negative integers"},
        {"fractional_dim", K::safetensors, st("{" + entry("a", "F32", "[2.5]", "[0,8]") + "}", 8),
         "non-negative integers"},
        {"count_overflow", K::safetensors,
         st("{" + entry("a", "F32", "[4294967296,4294967296,4294967296]", "[0,8]") + "}", 8), "more elements than fit"},
        {"count_overflow_in_bytes", K::safetensors,
         st("{" + entry("a", "F64", "[4611686018427387904]", "[0,8]") + "}", 8), "more elements than fit"},
        {"shape_disagrees_with_range", K::safetensors, st("{" + entry("a", "F32", "[3]", "[0,8]") + "}", 8),
         "needs 12 bytes but data_offsets give 8"},
        {"offsets_past_buffer", K::safetensors, st("{" + entry("a", "U8", "[1000]", "[0,1000]") + "}", 8),
         "run past the byte buffer"},
        {"offsets_reversed", K::safetensors, st("{" + entry("a", "U8", "[0]", "[8,0]") + "}", 8),
         "begin after they end"},
        {"offsets_not_a_pair", K::safetensors, st("{" + entry("a", "U8", "[8]", "[0,4,8]") + "}", 8),
         "not [begin, end]"},
        {"overlap", K::safetensors,
         st("{" + entry("a", "U8", "[8]", "[0,8]") + "," + entry("b", "U8", "[8]", "[4,12]") + "}", 12), "overlaps"},
        {"hole", K::safetensors,
         st("{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[8,12]") + "}", 12),
         "hole of 4 bytes"},
        {"bytes_after_last_tensor", K::safetensors, st("{" + ok + "}", 12), "belong to no tensor"},
        {"duplicate_name", K::safetensors, st("{" + ok + "," + entry("a", "F32", "[2]", "[8,16]") + "}", 16),
         "key 'a' twice"},
        {"duplicate_field", K::safetensors,
         st("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
         "key 'dtype' twice"},
        {"missing_field", K::safetensors, st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1),
         "needs dtype, shape and data_offsets"},
        {"unknown_field", K::safetensors,
         st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1), "unknown header field 'x'"},
        {"empty_name", K::safetensors, st("{" + entry("", "U8", "[1]", "[0,1]") + "}", 1), "empty name"},
        {"metadata_not_strings", K::safetensors, st("{\"__metadata__\":{\"step\":3}," + ok + "}", 8),
         "is not a string"},
        {"f4_half_byte", K::safetensors, st("{" + entry("a", "F4", "[3]", "[0,2]") + "}", 2),
         "do not fill whole bytes"},
        {"format_for_missing_tensor", K::safetensors,
         st("{\"__metadata__\":{\"roundscope.format.zz\":\"e2m1\"}," + ok + "}", 8), "not a tensor of the file"},
        {"format_unknown", K::safetensors,
         st("{\"__metadata__\":{\"roundscope.format.a\":\"e9m9\"}," + entry("a", "U8", "[8]", "[0,8]") + "}", 8),
         "unknown one-byte format"},
        {"format_bits_out_of_range", K::safetensors,
         st("{\"__metadata__\":{\"roundscope.format.a\":\"e2m1\"}," + entry("a", "U8", "[8]", "[0,8]") + "}", 8),
         "bits set above the 4-bit format"},

        {"npy_empty", K::npy, {}, "bad magic"},
        {"npy_bad_magic", K::npy, raw("\x93NUMPX\x01\x00\x10\x00{}"s), "bad magic"},
        {"npy_version_4", K::npy, raw("\x93NUMPY\x04\x00\x10\x00{}"s), "unsupported .npy version 4.0"},
        {"npy_header_past_end", K::npy, raw("\x93NUMPY\x01\x00\xff\x7f{'descr'"s), "runs past the end"},
        {"npy_header_no_newline", K::npy, raw("\x93NUMPY\x01\x00\x04\x00{}  "s), "does not end with a newline"},
        {"npy_header_not_dict", K::npy, npy("[1, 2]", 0), "expected '{'"},
        {"npy_missing_key", K::npy, npy("{'descr': '<f4', 'shape': (2,), }", 8), "exactly the keys"},
        {"npy_extra_key", K::npy, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
         "unexpected key 'x'"},
        {"npy_duplicate_key", K::npy, npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
         "key 'descr' twice"},
        {"npy_unknown_descr", K::npy, npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16),
         "unsupported descr '<c8'"},
        {"npy_structured", K::npy, npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8),
         "structured dtypes"},
        {"npy_negative_dim", K::npy, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8),
         "non-negative integers"},
        {"npy_count_overflow", K::npy,
         npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", 8),
         "too many bytes"},
        {"npy_dim_overflow", K::npy,
         npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 8),
         "dimension too large"},
        {"npy_short_data", K::npy, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8),
         "needs 12 bytes of data but the file has 8"},
        {"npy_extra_data", K::npy, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8),
         "needs 4 bytes of data but the file has 8"},
        {"npy_bad_bool", K::npy, npy("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", 8),
         "not True or False"},
        {"npy_unterminated_string", K::npy, npy("{'descr: '<f4", 0), "expected ':'"},
        {"npy_opaque_without_dtype", K::npy, npy("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4),
         "give the element type"},
        {"npy_too_many_dims", K::npy,
         npy(
             "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                 [] {
                     std::string s;
                     for (int i = 0; i < 65; ++i) s += "1, ";
                     return s;
                 }() +
                 "), }",
             4),
         "more than 64 dimensions"},
        {"npy_non_ascii_header", K::npy, npy("{'descr': '<f4', 'fortran_order': False, 'sh\xc3\xa4pe': (2,), }", 8, 3),
         "unexpected key 'sh\\xc3\\xa4pe'"},
    };
    return c;
}

std::vector<std::byte> valid_safetensors_image() {
    const std::vector<Tensor> tensors{
        random_tensor("q", DType::bf16, {2, 4, 8}, 1), random_tensor("k", DType::e4m3, {2, 4, 8}, 2),
        random_tensor("v", DType::e2m1, {2, 4, 8}, 3), random_tensor("s", DType::ue4m3, {5}, 4),
        random_tensor("lse", DType::f32, {2, 4}, 5)};
    return serialize_safetensors(tensors, {{"causal", "true"}});
}

std::vector<std::byte> valid_npy_image() { return serialize_npy(random_tensor("x", DType::f16, {3, 5}, 6)); }

}  // namespace roundscope::test
