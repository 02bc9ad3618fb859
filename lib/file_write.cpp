#include "lib/file_write.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "lib/error.hpp"

namespace roundscope {

// The bytes go to PATH.partial, renamed over PATH when complete: a failed write leaves no
// half-written file, and a file being read through a memory mapping may be overwritten.
void write_file(const std::string& path, std::span<const std::span<const std::byte>> parts) {
    const std::string partial = path + ".partial";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(partial.c_str(), "wb"), &std::fclose);
    if (!f) throw Error(path + ": cannot write: " + std::strerror(errno));
    auto fail = [&](const char* what) {
        const int err = errno;
        f.reset();
        std::remove(partial.c_str());
        throw Error(path + ": " + what + ": " + std::strerror(err));
    };
    for (const auto& part : parts)
        if (!part.empty() && std::fwrite(part.data(), 1, part.size(), f.get()) != part.size()) fail("write failed");
    if (std::fclose(f.release()) != 0) {
        std::remove(partial.c_str());
        throw Error(path + ": write failed: " + std::strerror(errno));
    }
    if (std::rename(partial.c_str(), path.c_str()) != 0) fail("cannot rename the written file into place");
}

}  // namespace roundscope
