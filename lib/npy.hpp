#pragma once
// .npy files (numpy/lib/format.py, "NPY format"): magic "\x93NUMPY", version 1.0, 2.0 or 3.0,
// a 2- (v1) or 4-byte (v2, v3) little-endian header length, then a Python dict literal
// {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces and ended by '\n'
// (latin-1 in v1/v2, UTF-8 in v3), then the data.
//
// Read: little and big endian (swapped into memory), C order, and Fortran order (transposed
// into C order). Arrays of ml_dtypes types carry an opaque descr ('<V2' for bfloat16, '|V1' or
// '<V1' for the FP8/FP6/FP4/E8M0 types, '<f1' for float8_e5m2) and need an explicit dtype;
// sub-byte types are stored one value per byte. A given dtype also reinterprets any descr of
// the same item size. Written: little endian, C order, data aligned to 64 bytes as numpy does.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/mapped_file.hpp"
#include "lib/tensor.hpp"

namespace roundscope {

/// The tensor is named after the file's stem ("q" for "dir/q.npy"). `dtype_option` is how the
/// caller gives `dtype` ("--dtype"), for the message that asks for it.
Tensor read_npy(const std::string& path, std::optional<DType> dtype = std::nullopt,
                std::string_view dtype_option = "a dtype", FileAccess access = default_file_access());
Tensor parse_npy(std::span<const std::byte> file, const std::string& label, std::string tensor_name,
                 std::shared_ptr<const void> owner, std::optional<DType> dtype = std::nullopt,
                 std::string_view dtype_option = "a dtype");

std::vector<std::byte> serialize_npy(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace roundscope
