#include "gpu/host/simt_wgmma.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/wgmma_descriptor.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu::simt {
namespace {

constexpr std::uint32_t poison = 0x7FFFFFFFu;  // a NaN: accumulators read while pending

// The calling thread's wgmmas in flight: each group's accumulators and their results, oldest
// first; the last group is open. `latest` holds the newest pending result of each accumulator
// array, which a chained wgmma adds to.
struct Pending {
    float* d;
    std::vector<std::uint32_t> result;
};
thread_local std::deque<std::vector<Pending>> groups;
struct Latest {
    std::vector<std::uint32_t> result;
    int in_flight = 0;  // the accumulators' wgmmas not yet completed
};
thread_local std::map<float*, Latest> latest;

std::uint16_t shared_bf16(std::uint32_t address) {
    const Block& b = current_block();
    if (address + 2 > b.shared_bytes)
        throw Error(fmt::format("wgmma: an operand element at shared +{} lies outside the block's {} bytes", address,
                                b.shared_bytes));
    std::uint16_t v = 0;
    std::memcpy(&v, b.shared + address, 2);
    return v;
}

// Element (row, k) of A held in the warp's mma.sync A fragments (rows 16 w .. 16 w + 15).
struct RegisterA {
    std::array<std::uint32_t, 32> regs[4];
    std::uint32_t at(int row, int k) const {
        const int r = row % 16, group = r % 8, thread = (k % 8) / 2;
        const int i = (k & 1) + (r >= 8 ? 2 : 0) + (k >= 8 ? 4 : 0);  // a0..a7 (mma.sync m16n8k16)
        return regs[i / 2][static_cast<std::size_t>(group * 4 + thread)] >> (16 * (i & 1)) & 0xFFFF;
    }
};

const emu::MmaModel& wgmma_model() {
    const emu::MmaModel* m = emu::find_mma_model(current_block().arch, "wgmma", emu::bf16, emu::bf16, emu::f32);
    if (m == nullptr) throw Error(fmt::format("wgmma: no bf16 model for {}", current_block().arch));
    return *m;
}

}  // namespace

void wgmma_bf16(float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b, bool scale_d,
                Major a_major, Major b_major) {
    if (n < 8 || n > 256 || n % 8 != 0) throw Error(fmt::format("wgmma: N = {} is not a multiple of 8 in [8, 256]", n));
    const unsigned t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    RegisterA ra{};
    if (a_regs != nullptr)  // the warp's A fragments (a warp-collective step: every lane hands in its 4)
        for (int r = 0; r < 4; ++r) ra.regs[r] = warp_gather(a_regs[r]);
    const WgmmaOperand a = decode_descriptor(desc_a), b = decode_descriptor(desc_b);
    const emu::MmaModel& model = wgmma_model();
    // C: the pending result of a chained wgmma on these accumulators, else the registers
    const auto chained = latest.find(d);
    std::vector<std::uint32_t> c(static_cast<std::size_t>(n / 2));
    for (std::size_t i = 0; i < c.size(); ++i)
        c[i] = !scale_d ? 0u : chained != latest.end() ? chained->second.result[i] : bits_of(d[i]);
    std::vector<std::uint32_t> result(c.size());
    for (int j = 0; j < n / 8; ++j) {
        for (int i = 0; i < 4; ++i) {
            const auto row = static_cast<std::uint32_t>(16 * warp + lane / 4 + 8 * (i / 2));
            const auto col = static_cast<std::uint32_t>(8 * j + 2 * (lane % 4) + i % 2);
            std::uint32_t x[16], y[16];
            for (std::uint32_t k = 0; k < 16; ++k) {
                x[k] = a_regs != nullptr ? ra.at(static_cast<int>(row), static_cast<int>(k))
                                         : shared_bf16(operand_address(a, a_major, row, k, 2));
                y[k] = shared_bf16(operand_address(b, b_major, col, k, 2));
            }
            const std::size_t at = static_cast<std::size_t>(4 * j + i);
            result[at] = emu::mma_dot(model, x, y, 1, 16, c[at]);
        }
    }
    for (int i = 0; i < n / 2; ++i) d[i] = float_from_bits(poison);
    if (groups.empty()) groups.emplace_back();
    Latest& l = latest[d];
    l.result = result, ++l.in_flight;
    groups.back().push_back({d, std::move(result)});
}

void wgmma_commit_group() { groups.emplace_back(); }

void wgmma_wait_group(int pending) {
    std::size_t committed = groups.empty() ? 0 : groups.size() - 1;  // the open group is not committed
    while (committed > static_cast<std::size_t>(std::max(pending, 0))) {
        for (const Pending& p : groups.front()) {
            for (std::size_t i = 0; i < p.result.size(); ++i) p.d[i] = float_from_bits(p.result[i]);
            const auto it = latest.find(p.d);
            if (--it->second.in_flight == 0) latest.erase(it);  // nothing newer pending
        }
        groups.pop_front();
        --committed;
    }
}

}  // namespace roundscope::gpu::simt
