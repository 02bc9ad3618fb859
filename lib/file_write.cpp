#include "lib/file_write.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "lib/error.hpp"

namespace roundscope {

void write_file(const std::string& path, std::span<const std::span<const std::byte>> parts) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!f) throw Error(path + ": cannot write: " + std::strerror(errno));
    for (const auto& part : parts)
        if (!part.empty() && std::fwrite(part.data(), 1, part.size(), f.get()) != part.size())
            throw Error(path + ": write failed: " + std::strerror(errno));
    if (std::fclose(f.release()) != 0) throw Error(path + ": write failed: " + std::strerror(errno));
}

}  // namespace roundscope
