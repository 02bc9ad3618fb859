#pragma once
// Tensor files that are wrong in every way the readers must survive, generated rather than
// committed as blobs. Each names the error its reader must report. The fuzzer starts from
// these too (tests/fuzz/).
#include <cstddef>
#include <string>
#include <vector>

namespace roundscope::test {

enum class FileKind { safetensors, npy };

struct HostileFile {
    std::string name;  // what is wrong, as a file name ("header_length_past_end")
    FileKind kind;
    std::vector<std::byte> bytes;
    std::string expected;  // a phrase the error message must contain
};

std::vector<HostileFile> hostile_corpus();

/// Valid files of both kinds, with several tensors, for truncation and mutation sweeps.
std::vector<std::byte> valid_safetensors_image();
std::vector<std::byte> valid_npy_image();

}  // namespace roundscope::test
