// A report task never stores a result under another content's key: a dump rewritten between the
// scan and the task is an error naming it; a cache entry is this task's result only when its
// key, file, layer, step, head, parts and digest say so.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "api/report/report_tasks.hpp"
#include "emu/numbers/round.hpp"
#include "lib/error.hpp"
#include "lib/tensor_io.hpp"

using namespace roundscope;
using namespace roundscope::api;

namespace {

void write_dump(const std::string& path, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    std::vector<Tensor> tensors;
    for (const char* name : {"q", "k", "v"}) {
        Tensor t = Tensor::zeros(name, DType::f32, {1, 32, 8});
        for (std::uint64_t i = 0; i < 32 * 8; ++i) t.set_bits_at(i, emu::cast_from_f64(g(rng), emu::f32, {}));
        tensors.push_back(std::move(t));
    }
    write_tensor_file(path, tensors, {{"layer", "3"}, {"step", "7"}});
}

ReportOptions options() {
    ReportOptions o;
    o.recipes = {emu::find_recipe("fa2-bf16")};
    o.leak_tokens = 16;
    return o;
}

}  // namespace

TEST_CASE("A dump rewritten after the scan stops its task - a result is checked against its task", "[report]") {
    const auto dir = std::filesystem::temp_directory_path() / "roundscope_test_report_tasks";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "a.safetensors").string();
    write_dump(path, 1);
    const std::vector<DumpFile> files = scan_dumps(dir.string(), "", options().recipes);
    const std::vector<ReportTask> tasks = report_tasks(files, options());
    REQUIRE(tasks.size() == 1);
    const nlohmann::json result = run_task(files[0], tasks[0], options(), 1);
    CHECK(is_task_result(result, tasks[0], files[0]));

    nlohmann::json edited = result;
    edited["headroom"]["rows_total"] = 31;
    CHECK_FALSE(is_task_result(edited, tasks[0], files[0]));  // the digest no longer matches
    nlohmann::json other = result;
    other["task"] = "another-key";
    CHECK_FALSE(is_task_result(other, tasks[0], files[0]));
    nlohmann::json partial = result;
    partial.erase("pcollapse");
    CHECK_FALSE(is_task_result(partial, tasks[0], files[0]));
    CHECK_FALSE(is_task_result(nlohmann::json::object(), tasks[0], files[0]));
    CHECK_FALSE(is_task_result(nlohmann::json::array(), tasks[0], files[0]));

    write_dump(path, 2);  // rewritten: the scan's key no longer names this content
    CHECK_THROWS_WITH(run_task(files[0], tasks[0], options(), 1), Catch::Contains("changed since the report read it"));
    std::filesystem::remove_all(dir);
}
