#pragma once
// The runtime the kernels' host code uses: device memory (DeviceBuffer) and launch(). Under
// nvcc, CUDA's (gpu/runtime_cuda.cuh); with ROUNDSCOPE_SIMT_HOST, the simulated GPU's
// (gpu/host/runtime_host.hpp), so that the same host code drives either.
#if defined(ROUNDSCOPE_SIMT_HOST)
#include "gpu/host/runtime_host.hpp"
#else
#include "gpu/runtime_cuda.cuh"
#endif
