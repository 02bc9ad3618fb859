// The flash-attention kernels and their host code, compiled for the simulated GPU: the very
// source nvcc compiles, with gpu/simt.hpp and gpu/runtime.hpp choosing the host's execution model.
#include "gpu/flash_attention.cu"
