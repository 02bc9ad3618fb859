#pragma once
// Fitted MUFU models as one compact byte string, small enough to build into the library: the
// tables' first differences (an ex2 table steps by 0 to 3 ulps) as zigzag LEB128 varints, each
// table's deflated by zlib (0.43 MB for the H100's three). Written by tools/gpu/mufu/mufu_fit
// --pack, read by h100_mufu.cpp.
//
//   "RSMUFU02", u32 n, text(provenance), then n models: text(parameters), u32 tables, and per
//   table u32 entries, u32 varint bytes, u32 zlib bytes, the zlib stream.
//   text: u32 length, then the characters.
// Parameters are "key=value" lines: variant, rounding, fraction_bits, split, beyond, at_one,
// canonical_nan.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "emu/mufu/mufu_model.hpp"

namespace roundscope::emu {

struct MufuPack {
    std::map<std::string, std::string> provenance;  // device, driver, CUDA, where the capture is
    std::vector<MufuModel> models;
};

std::vector<unsigned char> pack_mufu_models(const MufuPack& pack);
/// Throws Error naming what is wrong (a bad magic, a truncated table, a corrupt zlib stream).
MufuPack unpack_mufu_models(const unsigned char* data, std::size_t size);

}  // namespace roundscope::emu
