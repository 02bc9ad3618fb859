#include "lib/file_write.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "lib/error.hpp"

namespace roundscope {
namespace {

// The temporary files being written, for the signal handler: fixed storage, because a handler
// may neither allocate nor lock.
constexpr int max_open_files = 32;
constexpr std::size_t max_path = 4096;
struct PendingFile {
    std::atomic<bool> used{false};
    char path[max_path] = {};
};
std::array<PendingFile, max_open_files> pending;
constexpr int max_folders = 8;
std::array<PendingFile, max_folders> pending_folders;

// The child processes to end before the files are removed (0: a free slot).
constexpr int max_children = 16;
std::array<std::atomic<int>, max_children> children{};

void end_children() noexcept {
    for (std::atomic<int>& c : children) {
        const int pid = c.load();
        if (pid <= 0) continue;
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
}

// `name` in the folder `parent`, removed with what it holds down to `depth` levels of folders;
// async-signal-safe (system calls only: no allocation, no opendir).
void remove_tree(int parent, const char* name, int depth) noexcept {
    const int fd = depth < 0 ? -1 : ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        ::unlinkat(parent, name, 0);
        return;
    }
    alignas(8) char buffer[4096];
    // Entries removed while listing may shift the listing: list again until a pass finds none.
    for (bool removed = true; removed;) {
        removed = false;
        ::lseek(fd, 0, SEEK_SET);
        for (ssize_t n; (n = ::getdents64(fd, buffer, sizeof buffer)) > 0;) {
            for (ssize_t at = 0; at < n;) {
                const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + at);
                at += entry->d_reclen;
                const char* leaf = entry->d_name;
                if (leaf[0] == '.' && (leaf[1] == 0 || (leaf[1] == '.' && leaf[2] == 0))) continue;
                remove_tree(fd, leaf, depth - 1);
                removed = true;
            }
        }
    }
    ::close(fd);
    ::unlinkat(parent, name, AT_REMOVEDIR);
}

int remember_in(std::span<PendingFile> table, const std::string& path) {
    if (path.size() >= max_path) return -1;
    for (std::size_t i = 0; i < table.size(); ++i) {
        bool expected = false;
        PendingFile& f = table[i];
        if (f.used.load() || !f.used.compare_exchange_strong(expected, true)) continue;
        std::memcpy(f.path, path.c_str(), path.size() + 1);
        return static_cast<int>(i);
    }
    return -1;  // more at once than the table holds: still removed on errors, not on signals
}

void remove_pending_folders() noexcept {
    for (PendingFile& f : pending_folders)
        if (f.used.load()) remove_tree(AT_FDCWD, f.path, 2);
}

extern "C" void remove_pending_and_reraise(int signal) {
    end_children();
    remove_pending_files();
    remove_pending_folders();
    std::signal(signal, SIG_DFL);
    std::raise(signal);
}

void install_cleanup_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (int s : {SIGINT, SIGTERM, SIGHUP}) {
            struct sigaction old {};
            ::sigaction(s, nullptr, &old);
            if (old.sa_handler == SIG_IGN) continue;  // e.g. started with nohup
            struct sigaction a {};
            a.sa_handler = remove_pending_and_reraise;
            sigemptyset(&a.sa_mask);
            ::sigaction(s, &a, nullptr);
        }
    });
}

int remember(const std::string& path) { return remember_in(pending, path); }

void forget(int slot) {
    if (slot >= 0) pending[static_cast<std::size_t>(slot)].used.store(false);
}

// What a new file gets without mkstemp's 0600: 0666 less the umask.
mode_t default_mode() {
    static const mode_t mode = [] {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        return static_cast<mode_t>(0666 & ~mask);
    }();
    return mode;
}

std::string message(const std::string& path, const char* what, int err) {
    return path + ": " + what + ": " + std::strerror(err);
}

}  // namespace

void cleanup_signals(sigset_t& set) {
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
}

CleanupSignalsHeld::CleanupSignalsHeld() {
    sigset_t set;
    cleanup_signals(set);
    ::pthread_sigmask(SIG_BLOCK, &set, &previous_);
}

CleanupSignalsHeld::~CleanupSignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

TemporaryFolder::TemporaryFolder(std::string pattern) {
    install_cleanup_handlers();
    const CleanupSignalsHeld held;  // until the folder is in the cleanup's table
    if (::mkdtemp(pattern.data()) == nullptr) throw FileError(message(pattern, "cannot create a folder", errno));
    path_ = std::move(pattern);
    slot_ = remember_in(pending_folders, path_);
}

TemporaryFolder::~TemporaryFolder() {
    std::error_code ec;
    if (!kept_) std::filesystem::remove_all(path_, ec);
    if (slot_ >= 0) pending_folders[static_cast<std::size_t>(slot_)].used.store(false);
}

void TemporaryFolder::keep() {
    kept_ = true;
    if (slot_ >= 0) pending_folders[static_cast<std::size_t>(slot_)].used.store(false);
    slot_ = -1;
}

ChildProcessGuard::ChildProcessGuard(int pid) {
    install_cleanup_handlers();
    for (int i = 0; i < max_children; ++i) {
        int expected = 0;
        if (children[static_cast<std::size_t>(i)].compare_exchange_strong(expected, pid)) {
            slot_ = i;
            return;
        }
    }
}

ChildProcessGuard::~ChildProcessGuard() {
    if (slot_ >= 0) children[static_cast<std::size_t>(slot_)].store(0);
}

void write_text(const std::string& path, std::string_view text) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
    write_file(path, std::span(&bytes, 1));
}

void remove_pending_files() noexcept {
    for (PendingFile& f : pending)
        if (f.used.load()) ::unlink(f.path);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    install_cleanup_handlers();
    const std::filesystem::path target(path_);
    const std::string extension = target.extension().string();
    const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
    std::string leaf = ".";  // in steps: GCC 12 takes "." + string for an overlapping copy (-Wrestrict)
    leaf += target.filename().string();
    leaf += ".XXXXXX";
    leaf += extension;
    std::string pattern = (folder / leaf).string();
    const CleanupSignalsHeld held;  // until the file is in the cleanup's table
    fd_ = ::mkstemps(pattern.data(), static_cast<int>(extension.size()));
    if (fd_ < 0) throw FileError(message(path_, "cannot create a file in its folder", errno));
    temporary_ = pattern;
    slot_ = remember(temporary_);
    ::fchmod(fd_, default_mode());
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
    forget(slot_);
}

void AtomicFile::write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw FileError(message(path_, "write failed", n < 0 ? errno : EIO));
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
}

void AtomicFile::commit() {
    // fsync reports the write errors a network or full file system defers to it.
    if (::fsync(fd_) != 0 && errno != EINVAL) throw FileError(message(path_, "write failed", errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw FileError(message(path_, "write failed", errno));
    if (std::rename(temporary_.c_str(), path_.c_str()) != 0)
        throw FileError(message(path_, "cannot move the written file into place", errno));
    committed_ = true;
}

void write_file(const std::string& path, std::span<const std::span<const std::byte>> parts) {
    AtomicFile file(path);
    for (const auto& part : parts) file.write(part);
    file.commit();
}

void check_output_path(const std::string& option, const std::string& path, const std::vector<std::string>& inputs) {
    const std::string named = option + ": '" + printable(path, 200) + "'";
    if (path.empty()) throw Error(option + ": the output path is empty");
    struct stat out {};
    if (::stat(path.c_str(), &out) == 0) {
        if (!S_ISREG(out.st_mode)) throw Error(named + " exists and is not a regular file");
        for (const std::string& input : inputs) {
            struct stat in {};
            if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
                throw Error(named + " is the input file '" + printable(input, 200) +
                            "': writing it would destroy the input");
        }
    }
    const std::filesystem::path target(path);
    const std::string folder = target.has_parent_path() ? target.parent_path().string() : ".";
    struct stat dir {};
    if (::stat(folder.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode))
        throw FileError(named + ": the folder '" + printable(folder, 200) + "' does not exist");
    // access(W_OK) says yes to root on a read-only mount: create and remove a file instead.
    std::string probe = (std::filesystem::path(folder) / ".roundscope-probe.XXXXXX").string();
    const CleanupSignalsHeld held;  // until the probe is gone again
    const int fd = ::mkstemp(probe.data());
    if (fd < 0)
        throw FileError(named + ": cannot create a file in the folder '" + printable(folder, 200) +
                        "': " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
}

}  // namespace roundscope
