#include "gpu/host/simt_wgmma.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_model.hpp"
#include "gpu/host/simt_host.hpp"
#include "gpu/host/warp_mma.hpp"
#include "gpu/primitives/wgmma_descriptor.hpp"
#include "lib/bits.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu::simt {
namespace {

constexpr std::uint32_t poison = 0x7FFFFFFFu;  // a NaN: accumulators read while pending

// The shared operand elements one wgmma read at its issue, and the spans of A and B.
struct SharedReads {
    std::vector<std::pair<std::uint32_t, std::uint16_t>> values;  // (offset, bits of a BF16 or an FP8)
    std::uint32_t bytes = 2;                                      // an element's
    SharedSpan a{~0u, 0}, b{~0u, 0};

    std::uint16_t read(std::uint32_t address, SharedSpan& span) {
        const Block& blk = current_block();
        if (address + bytes > blk.shared_bytes)
            throw Error(fmt::format("wgmma: an operand element at shared +{} lies outside the block's {} bytes",
                                    address, blk.shared_bytes));
        std::uint16_t v = 0;
        std::memcpy(&v, blk.shared + address, bytes);  // little-endian: an FP8 in the low byte
        values.emplace_back(address, v);
        span.begin = std::min(span.begin, address), span.end = std::max(span.end, address + bytes);
        return v;
    }
};

// The calling thread's wgmmas in flight: each group's accumulators and their results, oldest
// first; the last group is open. `latest` holds the newest pending result of each accumulator
// array, which a chained wgmma adds to.
struct Pending {
    float* d;
    std::vector<std::uint32_t> result;
    SharedReads reads;
};
thread_local std::deque<std::vector<Pending>> groups;
struct Latest {
    std::vector<std::uint32_t> result;
    int in_flight = 0;  // the accumulators' wgmmas not yet completed
};
thread_local std::map<float*, Latest> latest;
thread_local bool fenced = false;                 // a wgmma.fence since the last wait_group
thread_local std::uint64_t completed_groups = 0;  // groups[0] is group number completed_groups

std::size_t in_flight(std::size_t groups_from) {
    std::size_t n = 0;
    for (std::size_t g = groups_from; g < groups.size(); ++g) n += groups[g].size();
    return n;
}

// A completed wgmma: its operands must read as at issue, and its accumulators, when no newer
// wgmma on them is in flight, must still hold the poison (the thread did not write them).
void complete(const Pending& p) {
    const Block& blk = current_block();
    for (const auto& [address, value] : p.reads.values) {
        std::uint16_t now = 0;
        std::memcpy(&now, blk.shared + address, p.reads.bytes);
        if (now != value)
            throw Error(
                fmt::format("wgmma: its operand at shared +{} changed between its issue and its wait_group "
                            "(0x{:02x}, then 0x{:02x}): a wgmma reads shared memory until it completes",
                            address, value, now));
    }
    const auto it = latest.find(p.d);
    if (--it->second.in_flight > 0) return;  // a newer wgmma on these accumulators is in flight
    latest.erase(it);
    for (std::size_t i = 0; i < p.result.size(); ++i) {
        if (bits_of(p.d[i]) != poison)
            throw Error(
                fmt::format("wgmma: thread {} wrote its accumulator element {} while its wgmma was in flight "
                            "(they are the wgmma's until wgmma.wait_group)",
                            threadIdx.x, i));
    }
    for (std::size_t i = 0; i < p.result.size(); ++i) p.d[i] = float_from_bits(p.result[i]);
}

const emu::MmaModel& wgmma_model(const emu::Format& input) {
    const emu::MmaModel* m = emu::find_mma_model(current_block().arch, "wgmma", input, input, emu::f32);
    if (m == nullptr) throw Error(fmt::format("wgmma: no {} model for {}", input.name, current_block().arch));
    return *m;
}

// The model made ready once per simulated thread (its tables are shared between threads).
const emu::PreparedMma& prepared(const emu::MmaModel& model) {
    thread_local std::map<const emu::MmaModel*, emu::PreparedMma> cache;
    auto it = cache.find(&model);
    if (it == cache.end()) it = cache.emplace(&model, emu::PreparedMma(model)).first;
    return it->second;
}

// One wgmma of `input` elements (BF16: k16; E4M3: k32, both operands K-major, as the PTX ISA
// allows for 8-bit types).
void issue(const emu::Format& input, float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs,
           std::uint64_t desc_b, bool scale_d, Major a_major, Major b_major) {
    if (n < 8 || n > 256 || n % 8 != 0) throw Error(fmt::format("wgmma: N = {} is not a multiple of 8 in [8, 256]", n));
    if (!fenced)
        throw Error(
            fmt::format("wgmma: thread {} issued one without a wgmma.fence since its last wait_group (or the "
                        "kernel's start), which the PTX ISA requires before a wgmma whose registers the "
                        "thread may have touched",
                        threadIdx.x));
    const bool fp8 = input.bits == 8;
    const std::uint32_t k = fp8 ? 32 : 16, bytes = fp8 ? 1 : 2;
    const unsigned t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    std::array<std::uint32_t, 16 * 32> warp_a{};  // A from registers: the warp's 16 rows (a collective step)
    if (a_regs != nullptr) warp_a = warp_a_matrix(a_regs, fp8);
    const WgmmaOperand a = decode_descriptor(desc_a), b = decode_descriptor(desc_b);
    const emu::MmaModel& model = wgmma_model(input);
    // C: the pending result of a chained wgmma on these accumulators, else the registers
    const auto chained = latest.find(d);
    auto c = [&](std::size_t i) {
        return !scale_d ? 0u : chained != latest.end() ? chained->second.result[i] : bits_of(d[i]);
    };
    // The thread's elements as one small GEMM through the prepared model: its two rows of A
    // (16 w + l / 4 and 8 more) times the n / 4 columns it holds (2 (l % 4) and 2 (l % 4) + 1 of
    // every 8): d[4 j + 2 r + e] is row r, column 2 j + e of it.
    const auto cols = static_cast<std::size_t>(n / 4);
    SharedReads reads;
    reads.bytes = bytes;
    std::uint32_t x[2 * 32];
    std::vector<std::uint32_t> y(k * cols), cc(2 * cols), result(static_cast<std::size_t>(n / 2));
    for (std::uint32_t r = 0; r < 2; ++r) {
        const std::uint32_t row = 16 * warp + lane / 4 + 8 * r;
        for (std::uint32_t kk = 0; kk < k; ++kk)
            x[k * r + kk] = a_regs != nullptr ? warp_a[k * (row % 16) + kk]
                                              : reads.read(operand_address(a, a_major, row, kk, bytes), reads.a);
    }
    for (std::size_t q = 0; q < cols; ++q) {
        const auto col = static_cast<std::uint32_t>(8 * (q / 2) + 2 * (lane % 4) + q % 2);
        for (std::uint32_t kk = 0; kk < k; ++kk)
            y[kk * cols + q] = reads.read(operand_address(b, b_major, col, kk, bytes), reads.b);
        for (std::size_t r = 0; r < 2; ++r) cc[r * cols + q] = c(4 * (q / 2) + 2 * r + q % 2);
    }
    std::vector<std::uint32_t> out(2 * cols);
    prepared(model).run({x, y.data(), cc.data(), out.data(), 1, 2, static_cast<std::int64_t>(cols), k});
    for (std::size_t q = 0; q < cols; ++q)
        for (std::size_t r = 0; r < 2; ++r) result[4 * (q / 2) + 2 * r + q % 2] = out[r * cols + q];
    for (int i = 0; i < n / 2; ++i) d[i] = float_from_bits(poison);
    if (groups.empty()) groups.emplace_back();
    Latest& l = latest[d];
    l.result = result, ++l.in_flight;
    groups.back().push_back({d, std::move(result), std::move(reads)});
}

}  // namespace

void wgmma_bf16(float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b, bool scale_d,
                Major a_major, Major b_major) {
    issue(emu::bf16, d, n, desc_a, a_regs, desc_b, scale_d, a_major, b_major);
}

void wgmma_e4m3(float* d, int n, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b,
                bool scale_d) {
    issue(emu::e4m3, d, n, desc_a, a_regs, desc_b, scale_d, Major::k, Major::k);
}

void wgmma_fence() { fenced = true; }

void wgmma_commit_group() { groups.emplace_back(); }

void wgmma_wait_group(int pending) {
    if (!groups.empty() && !groups.back().empty())
        throw Error(
            fmt::format("wgmma: thread {} waits with {} wgmma(s) not committed (wgmma.commit_group closes "
                        "the group that wait_group waits for)",
                        threadIdx.x, groups.back().size()));
    std::size_t committed = groups.empty() ? 0 : groups.size() - 1;  // the open group is not committed
    while (committed > static_cast<std::size_t>(std::max(pending, 0))) {
        for (const Pending& p : groups.front()) complete(p);
        groups.pop_front();
        ++completed_groups;
        --committed;
    }
    fenced = false;
}

std::vector<InFlightRead> wgmma_shared_reads() {
    std::vector<InFlightRead> reads;
    std::uint64_t number = completed_groups;
    for (const auto& group : groups) {
        for (const Pending& p : group)
            for (const SharedSpan& s : {p.reads.a, p.reads.b})
                if (s.begin < s.end) reads.push_back({s, number});
        ++number;
    }
    return reads;
}

std::uint64_t wgmma_completed_groups() { return completed_groups; }

void wgmma_check_finished() {
    const std::size_t open = groups.empty() ? 0 : groups.back().size(), all = in_flight(0);
    groups.clear(), latest.clear(), fenced = false, completed_groups = 0;
    if (all > 0)
        throw Error(
            fmt::format("wgmma: thread {} ended with {} wgmma(s) in flight ({} not committed): commit and "
                        "wait for every wgmma before the kernel ends",
                        threadIdx.x, all, open));
}

}  // namespace roundscope::gpu::simt
