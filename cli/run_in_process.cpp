#include "cli/run_in_process.hpp"

#include <new>

#include "cli/command_files.hpp"
#include "cli/commands.hpp"
#include "lib/error.hpp"

namespace roundscope::cli {

InProcessResult run_in_process(const std::vector<std::string>& args, std::map<std::string, TensorFile> inputs,
                               const std::vector<std::string>& output_names) {
    InProcessFiles files;
    files.inputs = std::move(inputs);
    for (const std::string& name : output_names) files.outputs[name];
    std::vector<std::string> storage{"roundscope"};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : storage) argv.push_back(a.data());

    CLI::App app{"roundscope"};
    add_all_commands(app);
    RunOutcome outcome;
    {
        const InProcessFiles::Scope scope(files);
        outcome = run_app_outcome(app, static_cast<int>(argv.size()), argv.data());
    }
    if (outcome.code == 2) {
        if (outcome.failure == RunOutcome::Failure::memory) throw std::bad_alloc();
        if (outcome.failure == RunOutcome::Failure::file) throw FileError(outcome.message);
        throw Error(outcome.message);
    }
    InProcessResult result;
    result.exit_code = outcome.code;
    if (files.json) result.json = std::move(*files.json);
    for (auto& [name, file] : files.outputs)
        if (!file.path.empty()) result.outputs.emplace(name, std::move(file));
    return result;
}

}  // namespace roundscope::cli
