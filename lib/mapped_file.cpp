#include "lib/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/error.hpp"

namespace roundscope {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    std::shared_ptr<MappedFile> file(new MappedFile);
    file->path_ = path;
    file->size_ = static_cast<std::size_t>(st.st_size);
    if (file->size_ > 0) {
        void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw Error(path + ": cannot map: " + std::strerror(err));
        }
        // Readers stream through tensors front to back.
        ::madvise(p, file->size_, MADV_SEQUENTIAL);
        file->data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);
    return file;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace roundscope
