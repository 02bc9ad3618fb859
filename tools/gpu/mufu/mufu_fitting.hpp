#pragma once
// Fitting a model of a special-function unit (emu/mufu/mufu_model.hpp) to a capture
// (mufu_capture.hpp), with no knowledge of how the unit computes: each function's structures
// are tried in order, their free parts read off the capture's windows, and the model checked
// against every 2^16-input digest of all 2^32 inputs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emu/mufu/mufu_model.hpp"
#include "tools/gpu/mufu/mufu_capture.hpp"

namespace roundscope::gpu {

using emu::fixed_rounding_name;
using emu::FixedRounding;
using emu::MufuModel;

struct MufuFit {
    std::optional<MufuModel> model;  // absent when no hypothesis fits the windows
    std::vector<std::string> log;    // what was tried, and how each candidate fared
};

/// The model the windows determine (digests are used only to pick the NaN rule).
MufuFit fit_mufu_model(const MufuCapture& capture, int threads = 0);

/// The chunks whose digest the model does not reproduce (empty: bit-exact on all 2^32 inputs).
std::vector<std::size_t> failing_chunks(const MufuModel& model, const std::vector<std::uint64_t>& digests,
                                        int threads = 0);

}  // namespace roundscope::gpu
