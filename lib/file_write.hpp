#pragma once
// Files written whole or not at all. The bytes go to a unique temporary file in the target's
// folder (mkstemp, so no user file is ever overwritten by it), which is renamed over the target
// only when complete; it is removed on any error, on destruction before commit, and on SIGINT
// or SIGTERM. A reader of the old file (a memory mapping included) keeps its bytes.
#include <csignal>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace roundscope {

class AtomicFile {
public:
    /// Creates the temporary file beside `path`, with the same extension (a program that picks
    /// its format by extension can write to it). Error naming `path` if it cannot.
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    /// Where the bytes go until commit; another process may write it instead of write().
    const std::string& temporary_path() const { return temporary_; }
    void write(std::span<const std::byte> bytes);
    /// Flushes, closes and renames the temporary file over the target.
    void commit();

private:
    std::string path_, temporary_;
    int fd_ = -1;
    int slot_ = -1;  // in the table the signal handler cleans up
    bool committed_ = false;
};

/// Removes every temporary file an AtomicFile still holds; async-signal-safe, for handlers
/// that end the process.
void remove_pending_files() noexcept;

/// A folder of this run's, made with mkdtemp from `pattern` (ending in XXXXXX): removed with
/// what it holds when this ends, after an error as after success, and by the cleanup on
/// SIGINT, SIGTERM or SIGHUP (to two levels of folders below it). FileError if it cannot be made.
class TemporaryFolder {
public:
    explicit TemporaryFolder(std::string pattern);
    ~TemporaryFolder();
    TemporaryFolder(const TemporaryFolder&) = delete;
    TemporaryFolder& operator=(const TemporaryFolder&) = delete;

    const std::string& path() const { return path_; }
    /// Left in place after all (it holds what must not be lost), on a signal too.
    void keep();

private:
    std::string path_;
    int slot_ = -1;  // in the table the signal handler cleans up
    bool kept_ = false;
};

/// A child process (a script writing an AtomicFile's temporary file, say) that the cleanup on
/// SIGINT, SIGTERM or SIGHUP kills and waits for before it removes the temporary files: one
/// left running would write its file after the cleanup. Register it while those signals are
/// blocked around the fork, so that no signal falls between the two.
class ChildProcessGuard {
public:
    explicit ChildProcessGuard(int pid);
    ~ChildProcessGuard();
    ChildProcessGuard(const ChildProcessGuard&) = delete;
    ChildProcessGuard& operator=(const ChildProcessGuard&) = delete;

private:
    int slot_ = -1;
};

/// The signals the cleanup handles (SIGINT, SIGTERM, SIGHUP), for blocking them around a fork.
void cleanup_signals(sigset_t& set);

/// Holds back the cleanup's signals on this thread while it lives: a file made and then removed
/// (a probe) or registered for the cleanup (an AtomicFile's) between the two would otherwise be
/// left behind by a signal that falls in between. A held signal is handled when it ends.
class CleanupSignalsHeld {
public:
    CleanupSignalsHeld();
    ~CleanupSignalsHeld();
    CleanupSignalsHeld(const CleanupSignalsHeld&) = delete;
    CleanupSignalsHeld& operator=(const CleanupSignalsHeld&) = delete;

private:
    sigset_t previous_;
};

/// The parts, concatenated, written to `path` through an AtomicFile.
void write_file(const std::string& path, std::span<const std::span<const std::byte>> parts);

/// `text` written to `path` through an AtomicFile.
void write_text(const std::string& path, std::string_view text);

/// Before any work: Error "OPTION: 'PATH' ..." when the output `path` is an existing file that
/// is not a regular file (a device, a FIFO, a folder), is the same file as one of `inputs` (same
/// device and inode, however it is spelled or linked), or lies in a folder that does not exist
/// or cannot be written.
void check_output_path(const std::string& option, const std::string& path, const std::vector<std::string>& inputs);

}  // namespace roundscope
