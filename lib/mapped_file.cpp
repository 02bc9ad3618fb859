#include "lib/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope {
namespace {

// A file truncated by another process while it is mapped raises SIGBUS on the next read of a
// lost page. The handler finds the mapping the address falls in and ends the process with the
// one-line error and exit code 2 of every other bad input, instead of dying by the signal.
// Fixed storage: a handler may neither allocate nor lock.
constexpr int max_mappings = 64;
constexpr std::size_t max_path = 1024;
struct Mapping {
    std::atomic<bool> used{false};
    const std::byte* begin = nullptr;
    std::size_t size = 0;
    char path[max_path] = {};
};
std::array<Mapping, max_mappings> mappings;

void write_stderr(const char* s) {
    std::size_t n = std::strlen(s);
    while (n > 0) {
        const ssize_t w = ::write(2, s, n);
        if (w <= 0) return;
        s += w, n -= static_cast<std::size_t>(w);
    }
}

extern "C" void report_lost_page(int, siginfo_t* info, void*) {
    const auto* at = static_cast<const std::byte*>(info->si_addr);
    const char* path = nullptr;
    for (const Mapping& m : mappings)
        if (m.used.load() && at >= m.begin && at < m.begin + m.size) path = m.path;
    write_stderr("roundscope: error: ");
    write_stderr(path ? path : "an input file");
    write_stderr(": the file was truncated or changed while it was being read\n");
    remove_pending_files();
    ::_exit(2);
}

void install_lost_page_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction a {};
        a.sa_sigaction = report_lost_page;
        a.sa_flags = SA_SIGINFO;
        sigemptyset(&a.sa_mask);
        ::sigaction(SIGBUS, &a, nullptr);
    });
}

int remember(const std::byte* begin, std::size_t size, const std::string& path) {
    for (int i = 0; i < max_mappings; ++i) {
        Mapping& m = mappings[static_cast<std::size_t>(i)];
        bool expected = false;
        if (m.used.load() || !m.used.compare_exchange_strong(expected, true)) continue;
        m.begin = begin, m.size = size;
        const std::size_t n = std::min(path.size(), max_path - 1);
        std::memcpy(m.path, path.data(), n);
        m.path[n] = '\0';
        return i;
    }
    return -1;  // the handler then names no file
}

std::atomic<FileAccess> default_access{FileAccess::map};

// Reads size bytes of fd into memory aligned for any element type; an Error where the file
// ends early (another process truncated it) or the read fails.
const std::byte* read_whole(int fd, std::size_t size, const std::string& path) {
    constexpr std::size_t alignment = 64;
    auto* data = static_cast<std::byte*>(std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment));
    if (data == nullptr) throw std::bad_alloc();
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pread(fd, data + done, size - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            std::free(data);
            if (n == 0) throw FileError(path + ": the file was truncated or changed while it was being read");
            throw FileError(path + ": cannot read: " + std::strerror(err));
        }
        done += static_cast<std::size_t>(n);
    }
    return data;
}

}  // namespace

FileAccess default_file_access() { return default_access.load(); }
void set_default_file_access(FileAccess access) { default_access.store(access); }

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
    return open(path, default_file_access());
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, FileAccess access) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw FileError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    std::shared_ptr<MappedFile> file(new MappedFile);
    file->path_ = path;
    file->size_ = static_cast<std::size_t>(st.st_size);
    if (file->size_ > 0 && access == FileAccess::copy) {
        try {
            file->data_ = read_whole(fd, file->size_, path);
        } catch (...) {
            ::close(fd);
            throw;
        }
    } else if (file->size_ > 0) {
        void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw FileError(path + ": cannot map: " + std::strerror(err));
        }
        // Readers stream through tensors front to back.
        ::madvise(p, file->size_, MADV_SEQUENTIAL);
        file->data_ = static_cast<const std::byte*>(p);
        file->mapped_ = true;
        install_lost_page_handler();
        file->slot_ = remember(file->data_, file->size_, path);
    }
    ::close(fd);
    return file;
}

MappedFile::~MappedFile() {
    if (slot_ >= 0) mappings[static_cast<std::size_t>(slot_)].used.store(false);
    if (data_ && mapped_) ::munmap(const_cast<std::byte*>(data_), size_);
    if (data_ && !mapped_) std::free(const_cast<std::byte*>(data_));
}

}  // namespace roundscope
