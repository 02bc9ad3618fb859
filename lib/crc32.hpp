#pragma once
// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320: the checksum of zlib.crc32 and of gzip),
// so a user can check that roundscope read exactly the bytes their framework wrote.
#include <cstddef>
#include <cstdint>
#include <span>

namespace roundscope {

/// Continues `crc` over `bytes` (start with 0).
std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

}  // namespace roundscope
