#pragma once
// Element types of tensors as files store them: the integer types and every number format of
// emu/ (each float dtype carries the name of its emu::Format, so emu/batch/tensor_decode.hpp maps
// one to the other; tests/lib/test_dtype.cpp checks that the two lists agree).
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace roundscope {

enum class DType : std::uint8_t {
    boolean,
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    f16,
    bf16,
    f32,
    f64,
    e4m3,
    e5m2,
    e4m3fnuz,
    e5m2fnuz,
    e8m0,
    e2m3,
    e3m2,
    e2m1,
    ue4m3,
    mxint8,
};

enum class DTypeKind : std::uint8_t { boolean, unsigned_integer, signed_integer, floating };

struct DTypeInfo {
    DType dtype;
    std::string_view name;  // roundscope's name; for floating kinds, the emu format's name
    DTypeKind kind;
    int value_bits;                // bits a value uses (6 for FP6, 4 for FP4)
    int storage_bytes;             // bytes per element in memory: sub-byte formats take one byte each
    std::string_view safetensors;  // the safetensors dtype, empty where it has none
    int safetensors_bits;          // bits per element inside a safetensors file (packed F4/F6)
    std::string_view numpy;        // numpy's descr without byte order ("f4"), empty where numpy
                                   // has no type of its own (ml_dtypes types: opaque "V<size>")
    std::string_view ml_dtypes;    // the ml_dtypes type name, empty where none
    std::string_view torch;        // PyTorch's dtype name (torch.float8_e4m3fn), empty where none
};

/// One row per DType, in enum order.
std::span<const DTypeInfo> all_dtypes();
const DTypeInfo& info(DType t);
inline std::string_view name(DType t) { return info(t).name; }
inline bool is_floating(DType t) { return info(t).kind == DTypeKind::floating; }

/// Another spelling of a dtype: its ml_dtypes / PyTorch name ("bfloat16", "float8_e4m3fn") or
/// an alias of docs/cli.md ("fp8_e4m3", "fp4"). The one list of such names: emu's
/// find_format reads it too.
std::optional<DType> find_dtype_alias(std::string_view name);
/// By roundscope name ("bf16"), safetensors name ("BF16") or find_dtype_alias.
/// Note "int8" is the MXINT8 element format of docs/cli.md; the plain integer is "i8".
std::optional<DType> find_dtype(std::string_view name);
/// The same, throwing an Error that names `what` (an option or file) and lists the names.
DType parse_dtype(std::string_view name, std::string_view what);
std::optional<DType> find_safetensors_dtype(std::string_view safetensors_name);

}  // namespace roundscope
