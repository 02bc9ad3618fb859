#pragma once
// Sub-byte elements packed into a little-endian bit stream: element i occupies bits
// [i * bits, (i + 1) * bits), counting from bit 0 of byte 0. For 4-bit elements this is
// PyTorch's float4_e2m1fn_x2 order (element 2j in the low nibble of byte j: c10/util/
// Float4_e2m1fn_x2.h) and what safetensors' F4 stores; F6 uses the same stream order.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace roundscope {

/// Bytes needed for `count` packed elements of `bits` bits.
constexpr std::uint64_t packed_bytes(std::uint64_t count, int bits) { return (count * bits + 7) / 8; }

/// One element per byte (low bits) from the packed stream; `packed` holds packed_bytes(count).
std::vector<std::byte> unpack_bits(std::span<const std::byte> packed, std::uint64_t count, int bits);
/// The packed stream of one-per-byte elements; bits above `bits` must be zero; unused high
/// bits of the last byte are zero.
std::vector<std::byte> pack_bits(std::span<const std::byte> unpacked, int bits);

}  // namespace roundscope
