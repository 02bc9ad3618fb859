#pragma once
// A roundscope command line run inside the calling process, as the executable would run it
// (the same parsing, checks, messages and numerics), with tensor files in memory instead of
// on disk and the JSON result handed back instead of printed. The Python package is built on it.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tensor.hpp"

namespace roundscope::cli {

struct InProcessResult {
    int exit_code = 0;                          // 0, or 1 where a check found mismatches
    nlohmann::json json;                        // what the command printed with --json (null otherwise)
    std::map<std::string, TensorFile> outputs;  // the in-memory outputs the command wrote
};

/// Runs `roundscope ARGS...`. `inputs` are files the command reads by their names; every name
/// in `output_names` given to an output option is kept in memory. A run that would exit 2
/// throws its one-line message: FileError where the OS failed on a file, std::bad_alloc where
/// memory ran out, Error otherwise.
InProcessResult run_in_process(const std::vector<std::string>& args, std::map<std::string, TensorFile> inputs,
                               const std::vector<std::string>& output_names);

}  // namespace roundscope::cli
