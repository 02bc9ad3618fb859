// The report as library calls (api/report/report_call.hpp): its task list, one task's run (what a
// distributed engine's worker does), and the report itself, with progress handed to a Python
// callable as the tasks end. Keyword arguments into the typed request; no command line.
#include <chrono>
#include <mutex>

#include <nanobind/stl/string.h>

#include "api/report/report_call.hpp"
#include "python/module/keywords.hpp"
#include "python/module/request_parts.hpp"

namespace roundscope::python {
namespace {

api::ReportRequest request_of(const std::string& dir, const std::string& out, Keywords& k) {
    api::ReportRequest r;
    r.dir = dir, r.out = out;
    if (auto v = k.texts("recipe")) r.recipes = *v;
    if (auto v = k.settings("settings")) r.settings = *v;
    r.fitted = k.text("fitted");
    if (auto v = k.integer("k_sink")) r.k_sink = static_cast<int>(checked("k_sink", *v, api::ranges::k_sink));
    if (auto v = k.integer("rows")) r.rows = static_cast<std::uint64_t>(checked("rows", *v, api::ranges::report_rows));
    r.seed = k.seed("seed");
    r.threads = threads_of(k);
    return r;
}

nb::object task_list(const std::string& dir, const std::string& out, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    const api::ReportRequest r = request_of(dir, out, k);
    return to_python(run_released(k, r, api::report_task_list));
}

nb::object run_task(const std::string& dir, const std::string& key, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    const std::optional<std::string> file = k.text("file");
    const api::ReportRequest r = request_of(dir, "roundscope-report", k);
    return to_python(run_released(
        k, r, [&](const api::ReportRequest& request) { return api::report_run_task(request, key, file); }));
}

// progress(done, total, seconds) as tasks end: every `every` seconds and at the end.
class PythonProgress {
public:
    PythonProgress(nb::object callable, double every) : callable_(std::move(callable)), every_(every) {}

    api::ReportProgress hooks() {
        if (callable_.is_none()) return {};
        return {[this](std::size_t total) { total_ = total, start_ = last_ = Clock::now(); },
                [this] {
                    std::lock_guard<std::mutex> lock(mutex_);
                    ++done_;
                    const auto now = Clock::now();
                    if (done_ < total_ && std::chrono::duration<double>(now - last_).count() < every_) return;
                    last_ = now;
                    nb::gil_scoped_acquire held;
                    callable_(done_, total_, std::chrono::duration<double>(now - start_).count());
                }};
    }

private:
    using Clock = std::chrono::steady_clock;
    nb::object callable_;
    double every_;
    std::size_t total_ = 0, done_ = 0;
    Clock::time_point start_, last_;
    std::mutex mutex_;
};

nb::object report(const std::string& dir, const std::string& out, nb::kwargs kwargs) {
    Keywords k(std::move(kwargs));
    api::ReportRequest r = request_of(dir, out, k);
    r.shard = k.text("shard");
    r.tensorboard = k.text("tensorboard");
    r.tensorboard_run = k.text("tensorboard_run");
    r.tensorboard_heads = k.flag("tensorboard_heads").value_or(false);
    r.html = k.flag("html").value_or(true);
    r.no_cache = k.flag("no_cache").value_or(false);
    const nb::object callable = k.object("progress");
    if (!callable.is_none() && !PyCallable_Check(callable.ptr()))
        throw nb::type_error("progress: expected a callable progress(done, total, seconds) or None");
    PythonProgress progress(callable, k.number("progress_every").value_or(10.0));
    const api::ReportProgress hooks = progress.hooks();
    return to_python(
        run_released(k, r, [&](const api::ReportRequest& request) { return api::report(request, hooks); }));
}

}  // namespace

void bind_report_calls(nb::module_& m) {
    m.def("report_task_list", &task_list, nb::arg("dir"), nb::arg("out"), nb::arg("kwargs"),
          "The report's tasks: {\"dir\", \"tasks\": [{\"key\", \"file\", \"head\"}]}.");
    m.def("report_run_task", &run_task, nb::arg("dir"), nb::arg("key"), nb::arg("kwargs"),
          "One task of the report (file=: only the task's file read): its result.");
    m.def("report", &report, nb::arg("dir"), nb::arg("out"), nb::arg("kwargs"),
          "The report (or a shard of its tasks), progress(done, total, seconds) as tasks end: its summary.");
}

}  // namespace roundscope::python
