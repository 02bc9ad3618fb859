// The wgmma layout probe compiled for the simulated GPU: the very source nvcc compiles.
#include "gpu/probes/wgmma_layout_probe.cu"
