#pragma once
// A whole file mapped read-only into memory. Tensors read from it are views that share
// ownership of the mapping, so a file of any size is opened without reading it.
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace roundscope {

class MappedFile {
public:
    /// Maps `path`; an Error naming it if it cannot be opened or is not a regular file. Should
    /// the file be truncated while mapped, a read of a lost page ends the process with a
    /// one-line error naming it and exit code 2.
    static std::shared_ptr<const MappedFile> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

private:
    MappedFile() = default;
    std::string path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    int slot_ = -1;  // in the table the SIGBUS handler reads
};

}  // namespace roundscope
