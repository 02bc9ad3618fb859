// The Hopper forward kernel and its host code, compiled for the simulated GPU: the very source
// nvcc compiles, with gpu/simt.hpp and gpu/runtime.hpp choosing the host's execution model.
#include "gpu/hopper_flash.cu"
