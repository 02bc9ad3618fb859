#pragma once
// Which GPU the kernels run on: its compute capability, and the architecture whose tensor-core
// models describe it. On the simulated GPU, the architecture it simulates (gpu/device_host.cpp).
#include <string>

namespace roundscope::gpu {

/// Compute capability of device 0 as 10 * major + minor (0 without a usable GPU).
int compute_capability();

/// The architecture whose models (emu/mma/mma_model.hpp) describe a GPU of compute capability `cc`:
/// "sm80", "sm89", "sm90" or "sm100".
inline std::string model_arch(int cc) { return cc >= 100 ? "sm100" : cc >= 90 ? "sm90" : cc >= 89 ? "sm89" : "sm80"; }

}  // namespace roundscope::gpu
