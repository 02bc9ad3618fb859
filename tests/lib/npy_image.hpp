#pragma once
// Hand-built .npy images, so the reader meets headers numpy would write (and some it would not).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace roundscope::test {

/// magic, version major.0, the header (padded to `align` with '\n' at the end), then `data`.
inline std::vector<std::byte> npy_image(const std::string& dict, const std::vector<std::byte>& data, int major = 1,
                                        std::size_t align = 64) {
    const std::size_t prefix = major == 1 ? 10 : 12;
    std::string header = dict;
    while ((prefix + header.size() + 1) % align != 0) header += ' ';
    header += '\n';
    std::vector<std::byte> out(prefix);
    std::memcpy(out.data(), "\x93NUMPY", 6);
    out[6] = std::byte(static_cast<unsigned char>(major));
    const std::uint32_t n = static_cast<std::uint32_t>(header.size());
    std::memcpy(out.data() + 8, &n, prefix - 8);
    for (char c : header) out.push_back(std::byte(static_cast<unsigned char>(c)));
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
    std::vector<std::byte> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

}  // namespace roundscope::test
