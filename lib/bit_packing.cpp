#include "lib/bit_packing.hpp"

namespace roundscope {

std::vector<std::byte> unpack_bits(std::span<const std::byte> packed, std::uint64_t count, int bits) {
    std::vector<std::byte> out(count);
    const unsigned mask = (1u << bits) - 1;
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t bit = i * bits;
        const std::uint64_t byte = bit / 8;
        // An element spans at most two bytes (bits <= 8).
        unsigned window = static_cast<unsigned>(packed[byte]);
        if (byte + 1 < packed.size()) window |= static_cast<unsigned>(packed[byte + 1]) << 8;
        out[i] = static_cast<std::byte>((window >> (bit % 8)) & mask);
    }
    return out;
}

std::vector<std::byte> pack_bits(std::span<const std::byte> unpacked, int bits) {
    std::vector<std::byte> out(packed_bytes(unpacked.size(), bits));
    for (std::uint64_t i = 0; i < unpacked.size(); ++i) {
        const std::uint64_t bit = i * bits;
        const unsigned value = static_cast<unsigned>(unpacked[i]) << (bit % 8);
        out[bit / 8] |= static_cast<std::byte>(value & 0xFF);
        if (value > 0xFF) out[bit / 8 + 1] |= static_cast<std::byte>(value >> 8);
    }
    return out;
}

}  // namespace roundscope
