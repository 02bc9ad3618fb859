#pragma once
// An H100's special-function unit on the CPU: MUFU.EX2, MUFU.LG2 and MUFU.RCP as
// `ex2.approx.ftz.f32`, `lg2.approx.ftz.f32` and `rcp.approx.ftz.f32` give them on an NVIDIA H100
// 80GB HBM3 (sm_90; driver and CUDA 13.0), fitted by tools/gpu/mufu to the capture in
// tests/data/golden/h100 and bit-exact on all 2^32 inputs of each (the non-ftz variants too,
// behind the guards ptxas emits: docs/gpu.md). The tables are built into the library
// (h100_mufu.pack, about 0.5 MB) and decoded on first use.
#include <map>
#include <string>

#include "emu/mufu/mufu_model.hpp"

namespace roundscope::emu {

/// The fitted unit of `variant` (ex2.approx.ftz.f32, lg2.approx.ftz.f32 or rcp.approx.ftz.f32; Error
/// for others).
const MufuModel& h100_mufu(MufuVariant variant);

/// Where the models come from: device, driver, CUDA, the capture's file.
const std::map<std::string, std::string>& h100_mufu_provenance();

float h100_ex2_ftz(float x);
float h100_lg2_ftz(float x);
float h100_rcp_ftz(float x);

}  // namespace roundscope::emu
