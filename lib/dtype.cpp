#include "lib/dtype.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "lib/error.hpp"

namespace roundscope {
namespace {

using K = DTypeKind;
// Safetensors dtypes: huggingface/safetensors, safetensors/src/tensor.rs (`Dtype`, `bitsize`).
// numpy descrs: numpy/lib/format.py; ml_dtypes types are saved with an opaque descr. PyTorch names:
// torch/_C/_dtype (torch.float8_e4m3fn); it has no 6-bit or unpacked 4-bit type.
constexpr std::array<DTypeInfo, 23> table{{
    {DType::boolean, "bool", K::boolean, 8, 1, "BOOL", 8, "b1", "bool", "bool"},
    {DType::u8, "u8", K::unsigned_integer, 8, 1, "U8", 8, "u1", "uint8", "uint8"},
    {DType::i8, "i8", K::signed_integer, 8, 1, "I8", 8, "i1", "", "int8"},
    {DType::u16, "u16", K::unsigned_integer, 16, 2, "U16", 16, "u2", "uint16", "uint16"},
    {DType::i16, "i16", K::signed_integer, 16, 2, "I16", 16, "i2", "int16", "int16"},
    {DType::u32, "u32", K::unsigned_integer, 32, 4, "U32", 32, "u4", "uint32", "uint32"},
    {DType::i32, "i32", K::signed_integer, 32, 4, "I32", 32, "i4", "int32", "int32"},
    {DType::u64, "u64", K::unsigned_integer, 64, 8, "U64", 64, "u8", "uint64", "uint64"},
    {DType::i64, "i64", K::signed_integer, 64, 8, "I64", 64, "i8", "int64", "int64"},
    {DType::f16, "f16", K::floating, 16, 2, "F16", 16, "f2", "float16", "float16"},
    {DType::bf16, "bf16", K::floating, 16, 2, "BF16", 16, "", "bfloat16", "bfloat16"},
    {DType::f32, "f32", K::floating, 32, 4, "F32", 32, "f4", "float32", "float32"},
    {DType::f64, "f64", K::floating, 64, 8, "F64", 64, "f8", "float64", "float64"},
    {DType::e4m3, "e4m3", K::floating, 8, 1, "F8_E4M3", 8, "", "float8_e4m3fn", "float8_e4m3fn"},
    {DType::e5m2, "e5m2", K::floating, 8, 1, "F8_E5M2", 8, "", "float8_e5m2", "float8_e5m2"},
    {DType::e4m3fnuz, "e4m3fnuz", K::floating, 8, 1, "F8_E4M3FNUZ", 8, "", "float8_e4m3fnuz", "float8_e4m3fnuz"},
    {DType::e5m2fnuz, "e5m2fnuz", K::floating, 8, 1, "F8_E5M2FNUZ", 8, "", "float8_e5m2fnuz", "float8_e5m2fnuz"},
    {DType::e8m0, "e8m0", K::floating, 8, 1, "F8_E8M0", 8, "", "float8_e8m0fnu", "float8_e8m0fnu"},
    {DType::e2m3, "e2m3", K::floating, 6, 1, "F6_E2M3", 6, "", "float6_e2m3fn", ""},
    {DType::e3m2, "e3m2", K::floating, 6, 1, "F6_E3M2", 6, "", "float6_e3m2fn", ""},
    {DType::e2m1, "e2m1", K::floating, 4, 1, "F4", 4, "", "float4_e2m1fn", ""},
    {DType::ue4m3, "ue4m3", K::floating, 8, 1, "", 8, "", "", ""},
    {DType::mxint8, "int8", K::floating, 8, 1, "", 8, "", "", ""},
}};

constexpr bool rows_in_enum_order() {
    for (std::size_t i = 0; i < table.size(); ++i)
        if (static_cast<std::size_t>(table[i].dtype) != i) return false;
    return true;
}
static_assert(rows_in_enum_order(), "info(DType) indexes the table by enum value");

// The other spellings docs/cli.md gives the float formats.
struct Alias {
    std::string_view alias;
    DType dtype;
};
constexpr Alias aliases[] = {
    {"fp8_e4m3", DType::e4m3}, {"fp8_e5m2", DType::e5m2}, {"fp6_e2m3", DType::e2m3},
    {"fp6_e3m2", DType::e3m2}, {"fp4", DType::e2m1},      {"fp4_e2m1", DType::e2m1},
};

}  // namespace

std::span<const DTypeInfo> all_dtypes() { return table; }

const DTypeInfo& info(DType t) { return table[static_cast<std::size_t>(t)]; }

std::optional<DType> find_dtype_alias(std::string_view n) {
    for (const DTypeInfo& d : table)
        if (!d.ml_dtypes.empty() && n == d.ml_dtypes) return d.dtype;
    for (const Alias& a : aliases)
        if (n == a.alias) return a.dtype;
    return std::nullopt;
}

std::optional<DType> find_dtype(std::string_view n) {
    for (const DTypeInfo& d : table)
        if (n == d.name || (!d.safetensors.empty() && n == d.safetensors)) return d.dtype;
    return find_dtype_alias(n);
}

DType parse_dtype(std::string_view n, std::string_view what) {
    if (auto t = find_dtype(n)) return *t;
    std::string names;
    for (const DTypeInfo& d : table) {
        if (!names.empty()) names += ' ';
        names += d.name;
    }
    throw Error(std::string(what) + ": unknown dtype '" + std::string(n) + "' (dtypes: " + names + ")");
}

std::optional<DType> find_safetensors_dtype(std::string_view s) {
    for (const DTypeInfo& d : table)
        if (!d.safetensors.empty() && s == d.safetensors) return d.dtype;
    return std::nullopt;
}

}  // namespace roundscope
