// A report task never stores a result under another content's key: a dump rewritten between the
// scan and the task is an error naming it; a cache entry is this task's result only when its
// key, file, layer, step, head, parts and digest say so. The work a task shares among its
// analyses (truths, runs, a key-value group's truth) gives the results of work not shared.
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

// A grouped-query dump with the kernel's outputs and gradients (BF16 noise where a kernel's would be:
// the compare counts bits, whatever they are): 4 query heads on 2 key-value heads.
void write_grouped_dump(const std::string& path) {
    std::mt19937_64 rng(5);
    std::normal_distribution<double> g;
    std::vector<Tensor> tensors;
    for (const auto& [name, heads] :
         {std::pair{"q", 4}, {"k", 2}, {"v", 2}, {"do", 4}, {"o", 4}, {"dq", 4}, {"dk", 2}, {"dv", 2}}) {
        const std::uint64_t h = static_cast<std::uint64_t>(heads);
        Tensor t = Tensor::zeros(name, DType::bf16, {1, h, 24, 8});
        for (std::uint64_t i = 0; i < h * 24 * 8; ++i) t.set_bits_at(i, emu::cast_from_f64(g(rng), emu::bf16, {}));
        tensors.push_back(std::move(t));
    }
    write_tensor_file(path, tensors, {{"layer", "0"}, {"step", "0"}, {"causal", "true"}, {"enable_gqa", "true"}});
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

TEST_CASE("A grouped-query dump's tasks give the same results with their work shared as without", "[report]") {
    const auto dir = std::filesystem::temp_directory_path() / "roundscope_test_report_tasks_gqa";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_grouped_dump((dir / "a.safetensors").string());
    ReportOptions shared = options(), apart = options();
    shared.recipes = apart.recipes = {emu::find_recipe("fa2-bf16"), emu::find_recipe("fa3-fp8")};
    apart.share_truth = false;
    const std::vector<DumpFile> files = scan_dumps(dir.string(), "", shared.recipes);
    const std::vector<ReportTask> tasks = report_tasks(files, shared);
    REQUIRE(tasks.size() == 4);
    for (const ReportTask& t : tasks) {
        INFO("head " << t.head);
        const nlohmann::json a = run_task(files[0], t, shared, 1), b = run_task(files[0], t, apart, 1);
        CHECK(a == b);
        // the group's first head compares the group's dK and dV (the others do not)
        const nlohmann::json& compared = a.at("compare").at("fa2-bf16");
        const bool has_dk = compared.dump().find("\"dk\"") != std::string::npos;
        CHECK(has_dk == (t.head % 2 == 0));
    }
    std::filesystem::remove_all(dir);
}
