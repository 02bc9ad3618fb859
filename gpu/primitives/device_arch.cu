// The compute capability of device 0 from the CUDA runtime: 0 where no device is usable, so
// that a command without a GPU says so instead of failing inside a launch.
#include <cuda_runtime.h>

#include "gpu/primitives/device_arch.hpp"

namespace roundscope::gpu {

int compute_capability() {
    int count = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) return 0;
    return 10 * major + minor;
}

}  // namespace roundscope::gpu
