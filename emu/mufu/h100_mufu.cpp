#include "emu/mufu/h100_mufu.hpp"

#include <cstddef>

#include "emu/mufu/mufu_pack.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

// The pack, built in by the assembler (its path and hash come from CMake; the hash makes a
// changed pack a changed compile command, so no compiler cache serves a stale object).
asm(".pushsection .rodata\n"
    ".balign 16\n"
    ".globl roundscope_h100_mufu_pack\n"
    ".hidden roundscope_h100_mufu_pack\n"
    "roundscope_h100_mufu_pack:\n"
    ".incbin \"" ROUNDSCOPE_H100_MUFU_PACK
    "\"\n"
    ".globl roundscope_h100_mufu_pack_end\n"
    ".hidden roundscope_h100_mufu_pack_end\n"
    "roundscope_h100_mufu_pack_end:\n"
    ".popsection\n");
extern "C" const unsigned char roundscope_h100_mufu_pack[];
extern "C" const unsigned char roundscope_h100_mufu_pack_end[];

namespace roundscope::emu {
namespace {

const MufuPack& pack() {
    static const MufuPack p = unpack_mufu_models(
        roundscope_h100_mufu_pack, static_cast<std::size_t>(roundscope_h100_mufu_pack_end - roundscope_h100_mufu_pack));
    return p;
}

const MufuModel* find(MufuVariant v) {
    for (const MufuModel& m : pack().models)
        if (m.variant == v) return &m;
    return nullptr;
}

}  // namespace

const MufuModel& h100_mufu(MufuVariant variant) {
    const MufuModel* m = find(variant);
    if (m == nullptr) throw Error("no H100 model of " + std::string(mufu_ptx(variant)) + " is built in");
    return *m;
}

const std::map<std::string, std::string>& h100_mufu_provenance() { return pack().provenance; }

float h100_ex2_ftz(float x) {
    static const MufuModel& m = h100_mufu(MufuVariant::ex2_ftz);
    return float_from_bits(m(bits_of(x)));
}

float h100_lg2_ftz(float x) {
    static const MufuModel& m = h100_mufu(MufuVariant::lg2_ftz);
    return float_from_bits(m(bits_of(x)));
}

float h100_rcp_ftz(float x) {
    static const MufuModel& m = h100_mufu(MufuVariant::rcp_ftz);
    return float_from_bits(m(bits_of(x)));
}

}  // namespace roundscope::emu
