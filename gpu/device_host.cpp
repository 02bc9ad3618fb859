// What gpu/device.hpp and gpu/primitives/device_arch.hpp report about "the GPU" on the simulated GPU: the
// simulated architecture as a compute capability, so that host code written for a GPU
// (flash_crosscheck, the kit's sweep) runs unchanged on the CPU.
#include <string>

#include "gpu/device.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/primitives/device_arch.hpp"

namespace roundscope::gpu {

int compute_capability() {
    const std::string& arch = simt::simulated_architecture();
    return arch == "sm100" ? 100 : arch == "sm89" ? 89 : arch == "sm80" ? 80 : 90;
}

std::string device_name() { return "simulated GPU (" + simt::simulated_architecture() + ")"; }
std::string cuda_compiler() { return "none (simulated GPU)"; }
std::string cuda_runtime_version() { return "none"; }
std::string cuda_driver_version() { return "none"; }

}  // namespace roundscope::gpu
