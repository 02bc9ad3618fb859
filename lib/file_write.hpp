#pragma once
// Writes a file image, naming the path in any Error.
#include <cstddef>
#include <span>
#include <string>

namespace roundscope {

void write_file(const std::string& path, std::span<const std::span<const std::byte>> parts);

}  // namespace roundscope
