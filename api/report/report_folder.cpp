#include "api/report/report_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::api {
namespace fs = std::filesystem;

namespace {

constexpr const char* manifest_name = ".roundscope-layers";

std::string failed(const std::string& operation, const fs::path& path, const std::error_code& ec) {
    return operation + " " + path.string() + ": " + ec.message();
}

// The names a layers folder's manifest lists; empty without a manifest.
std::set<std::string> manifest_names(const fs::path& layers) {
    std::ifstream f(layers / manifest_name);
    if (!f) return {};
    try {
        const nlohmann::json j = nlohmann::json::parse(f);
        std::set<std::string> names;
        for (const auto& n : j.at("files")) {
            const std::string name = n.get<std::string>();
            if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
                throw Error("a name that is not a file of the folder");
            names.insert(name);
        }
        return names;
    } catch (const std::exception&) {
        throw Error("-o: " + (layers / manifest_name).string() +
                    " is not a report's manifest of its layer files; move " + layers.string() + " away");
    }
}

// An exclusive flock on OUT/.roundscope-report.lock, held while the report is put in place.
class FolderLock {
public:
    explicit FolderLock(const fs::path& out) {
        const fs::path path = out / ".roundscope-report.lock";
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd_ < 0) throw FileError("open " + path.string() + ": " + std::strerror(errno));
        while (::flock(fd_, LOCK_EX) != 0)
            if (errno != EINTR) {
                const int e = errno;
                ::close(fd_);
                throw FileError("lock " + path.string() + ": " + std::strerror(e));
            }
    }
    ~FolderLock() { ::close(fd_); }  // closing releases the lock
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace

void check_report_folder(const fs::path& out) {
    const fs::path layers = out / "layers";
    std::error_code ec;
    const fs::file_status s = fs::symlink_status(layers, ec);
    if (ec || !fs::exists(s)) return;
    if (fs::is_symlink(s))
        throw Error("-o: " + layers.string() +
                    " is a link; the report writes a folder of its own there (not "
                    "followed): move it away");
    if (!fs::is_directory(s)) throw Error("-o: " + layers.string() + " is there and not a folder; move it away");
    const std::set<std::string> ours = manifest_names(layers);
    for (fs::directory_iterator it(layers, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name != manifest_name && !ours.count(name))
            throw Error("-o: " + it->path().string() +
                        " is not a file an earlier report wrote there (not in its manifest " + manifest_name +
                        "): move it, or " + layers.string() + ", away");
    }
    if (ec) throw FileError(failed("read", layers, ec));
}

TemporaryFolder report_staging_folder(const fs::path& out) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) throw FileError(failed("create", out, ec));
    return TemporaryFolder((out / ".report-XXXXXX").string());
}

void write_layers_manifest(const fs::path& layers, const std::vector<std::string>& names) {
    write_text((layers / manifest_name).string(), nlohmann::json{{"files", names}}.dump(1));
}

std::string install_report(const fs::path& out, TemporaryFolder& staging_folder) {
    const FolderLock lock(out);
    // A signal between the renames would leave OUT without its layers: held until they are done.
    const CleanupSignalsHeld held;
    check_report_folder(out);  // again: another run may have put its report there meanwhile
    const fs::path staging = staging_folder.path();
    const fs::path layers = out / "layers", old = staging / "replaced-layers";
    std::error_code ec;
    const bool had_layers = fs::exists(fs::symlink_status(layers, ec));
    if (had_layers) {
        fs::rename(layers, old, ec);
        if (ec) throw FileError(failed("move aside", layers, ec));
    }
    // Puts the earlier layers back, or keeps them where they are and says so.
    const auto put_back_old = [&](const std::string& what) {
        std::error_code back;
        if (had_layers) fs::rename(old, layers, back);
        if (!back) return FileError(what);
        staging_folder.keep();
        return FileError(what + "; the earlier layers are in " + old.string());
    };
    fs::rename(staging / "layers", layers, ec);
    if (ec) throw put_back_old(failed("put in place", layers, ec));
    const fs::path report = out / "report.json";
    fs::rename(staging / "report.json", report, ec);
    if (ec) {
        std::error_code ignored;
        fs::rename(layers, staging / "layers", ignored);
        throw put_back_old(failed("put in place", report, ec));
    }
    if (had_layers) {  // only what its manifest lists (check_report_folder saw nothing else there)
        for (const std::string& name : manifest_names(old)) fs::remove(old / name, ec);
        fs::remove(old / manifest_name, ec);
        fs::remove(old, ec);
    }
    return report.string();
}

}  // namespace roundscope::api
