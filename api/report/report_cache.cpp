#include "api/report/report_cache.hpp"

#include <fstream>
#include <span>

#include "lib/error.hpp"
#include "lib/file_write.hpp"

namespace roundscope::api {

std::filesystem::path cache_entry_path(const std::filesystem::path& cache, const ReportTask& task) {
    return cache / (task.key + ".json");
}

CacheEntry read_cache_entry(const std::filesystem::path& path, const ReportTask& task, const DumpFile& file) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
    if (ec || status.type() == std::filesystem::file_type::not_found) return {};
    if (status.type() != std::filesystem::file_type::regular) return {CacheEntry::invalid, nullptr};  // never opened
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!in.good() && !in.eof()) return {CacheEntry::invalid, nullptr};
    if (j.is_discarded() || !is_task_result(j, task, file)) return {CacheEntry::invalid, nullptr};
    return {CacheEntry::valid, std::move(j)};
}

void write_cache_entry(const std::filesystem::path& path, const nlohmann::json& result) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
    if (status.type() != std::filesystem::file_type::not_found &&
        status.type() != std::filesystem::file_type::regular) {
        std::filesystem::remove_all(path, ec);
        if (ec) throw FileError(path.string() + ": " + ec.message());
    }
    write_text(path.string(), result.dump());
}

}  // namespace roundscope::api
