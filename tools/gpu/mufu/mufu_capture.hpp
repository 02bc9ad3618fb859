#pragma once
// A MUFU capture as a file: one .safetensors per variant with the 2^16 chunk digests and each
// window's outputs, delta-coded (int8 steps between consecutive outputs, with the steps that
// do not fit in an escape list) so that xz packs a binade of 2^23 outputs into about a megabyte.
//
//   digests            U64 [65536]
//   window<i>.first    U32 [2]      first input pattern, the first output
//   window<i>.step     I8  [count]  output[j] - output[j-1] (step[0] = 0); -128: see escape
//   window<i>.escape   I64 [e]      the escaped steps, in order
//   __metadata__: variant (the PTX), unit ("hardware" or "fake"), device, and the rest
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpu/probes/mufu_variants.hpp"

namespace roundscope::gpu {

struct MufuCapturedWindow {
    std::uint32_t first = 0;             // the first input pattern
    std::vector<std::uint32_t> outputs;  // for first, first + 1, ...
};

struct MufuCapture {
    MufuVariant variant{};
    std::map<std::string, std::string> metadata;  // variant and unit are set on writing
    std::vector<std::uint64_t> digests;           // mufu_chunks of them
    std::vector<MufuCapturedWindow> windows;
};

void write_mufu_capture(const std::string& path, const MufuCapture& capture);
/// Errors name the file and what is wrong (a missing tensor, a wrong length, a bad escape list).
MufuCapture read_mufu_capture(const std::string& path);

}  // namespace roundscope::gpu
