#pragma once
// A whole file in memory, read-only: mapped (a file of any size opens without being read) or
// copied in. Tensors read from it are views that share ownership of it.
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace roundscope {

/// How a file comes into memory. `map`: a read of a page lost to a truncation by another process
/// ends the process (a one-line error naming the file, exit code 2), which suits a command line.
/// `copy`: the file is read into memory at open, so a truncation is an Error then and nothing
/// can fault later, which suits a host process that must survive bad input (the Python package).
enum class FileAccess { map, copy };

/// The access of open() without one: `map` unless set_default_file_access changed it.
FileAccess default_file_access();
void set_default_file_access(FileAccess access);

class MappedFile {
public:
    /// `path` in memory; an Error naming it if it cannot be opened or is not a regular file, or
    /// (copy) if it shrinks while being read.
    static std::shared_ptr<const MappedFile> open(const std::string& path);
    static std::shared_ptr<const MappedFile> open(const std::string& path, FileAccess access);
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
    int slot_ = -1;        // in the table the SIGBUS handler reads
    bool mapped_ = false;  // data_ is a mapping (else memory of its own)
};

}  // namespace roundscope
