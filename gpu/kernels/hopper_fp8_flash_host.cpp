// The FP8 Hopper forward kernel and its host code, compiled for the simulated GPU: the very
// source nvcc compiles, with gpu/primitives/simt.hpp and gpu/primitives/runtime.hpp choosing the host's execution
// model.
#include "gpu/kernels/hopper_fp8_flash.cu"
