// The Hopper backward kernels and their host code, compiled for the simulated GPU: the very source
// nvcc compiles, with gpu/primitives/simt.hpp and gpu/primitives/runtime.hpp choosing the host's execution model.
#include "gpu/kernels/hopper_flash_backward.cu"
