#pragma once
// The report's folder OUT, replaced whole: a run writes its layer files and report.json into a
// folder of its own (OUT/.report-XXXXXX, mkdtemp) and then, holding OUT's lock
// (OUT/.roundscope-report.lock, flock), puts its layers/ and report.json in place of the ones
// there. So two runs on one OUT never mix their files, a run stopped half-way leaves the last
// whole report, and nothing but a folder this report wrote is ever removed: OUT/layers must be
// absent or a real folder (not a link) whose every file its manifest (.roundscope-layers) lists.
#include <filesystem>
#include <string>
#include <vector>

#include "lib/file_write.hpp"

namespace roundscope::api {

/// Before any work: an Error naming the path when OUT/layers is a link, not a folder, or holds a
/// file its manifest does not list (a user's, or an older report's without a manifest).
void check_report_folder(const std::filesystem::path& out);

/// A new, empty folder of this run's under OUT (created with OUT itself if need be), removed
/// with what it holds when the run ends, however it ends.
TemporaryFolder report_staging_folder(const std::filesystem::path& out);

/// The manifest of a layers folder holding `names`, written into it.
void write_layers_manifest(const std::filesystem::path& layers, const std::vector<std::string>& names);

/// Under OUT's lock, with SIGINT, SIGTERM and SIGHUP held: checks OUT again, puts staging/layers
/// and staging/report.json in place, and removes the layers folder they replace (the files its
/// manifest lists). If a step fails, what it moved goes back; if that fails too, the staging
/// folder is kept (the error names it: it holds the earlier layers). Returns OUT/report.json.
std::string install_report(const std::filesystem::path& out, TemporaryFolder& staging);

}  // namespace roundscope::api
