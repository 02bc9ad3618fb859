#pragma once
// D = A B + C through a tensor-core model as a library call, optionally checked bit for bit
// against the D a GPU wrote into the same file.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/file_source.hpp"
#include "lib/tensor.hpp"

namespace roundscope::api {

struct MmaRequest {
    FileSource source;                       // A [T,M,K], B [T,K,N], C [T,M,N] (and D to check)
    std::optional<std::string> arch;         // none: a capture's own, else sm90
    std::optional<std::string> instruction;  // none: a capture's own, else the architecture's default
    bool check = false;                      // compare with the file's D
    int threads = 0;
};

struct MmaAnswer {
    Tensor d;                              // in the accumulator's dtype
    std::string model;                     // the model's name
    std::uint64_t matched = 0, total = 0;  // with check: D's elements equal to the GPU's, of all
    nlohmann::json json;                   // file, arch, instruction, model, shape (capture; check's counts)
};
MmaAnswer mma(const MmaRequest& request);

/// ArgumentError for an architecture, instruction or thread count mma refuses (mma checks it too).
void check_mma_request(const MmaRequest& request);

/// {"models": [...]}: every tensor-core model with its parameters and sources.
nlohmann::json mma_models_json();

}  // namespace roundscope::api
