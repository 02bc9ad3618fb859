#pragma once
// safetensors files (the "Format" page of huggingface/safetensors' documentation): an 8-byte
// little-endian header length N, N bytes of UTF-8 JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the byte buffer that follows
// the header) plus an optional "__metadata__" string-to-string map, then the byte buffer.
//
// Reading checks everything safetensors' own validation checks (src/tensor.rs,
// `Metadata::validate`), and more: N <= 100 MB and within the file; the header is valid UTF-8
// JSON with no duplicate keys; every dtype is known; each shape's element count neither
// overflows nor disagrees with its byte range; the byte ranges cover the buffer exactly, in
// order, with no overlap and no hole. Any violation is an Error naming the file and tensor.
//
// Formats without a safetensors dtype (ue4m3, int8, or F4/F6 tensors whose packed size is not
// whole bytes) are written as U8 bit patterns with "roundscope.format.<tensor>": "<format>" in
// __metadata__, and read back as that format.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/mapped_file.hpp"
#include "lib/tensor.hpp"

namespace roundscope {

inline constexpr std::uint64_t safetensors_max_header = 100'000'000;

/// `path` in memory (mapped or copied: lib/mapped_file.hpp); byte-aligned tensors are views of it.
TensorFile read_safetensors(const std::string& path, FileAccess access = default_file_access());
/// Parses a whole file image; `label` names it in errors and `owner` keeps `file` alive
/// (null if the caller does).
TensorFile parse_safetensors(std::span<const std::byte> file, const std::string& label,
                             std::shared_ptr<const void> owner);

/// The file image of `tensors` with `metadata` (stale roundscope.format.* keys are replaced).
std::vector<std::byte> serialize_safetensors(std::span<const Tensor> tensors,
                                             const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::string& path, std::span<const Tensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace roundscope
