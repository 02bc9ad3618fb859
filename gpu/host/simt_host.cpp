#include "gpu/host/simt_host.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_model.hpp"
#include "gpu/host/simt_tma.hpp"
#include "gpu/host/simt_wgmma.hpp"
#include "gpu/host/warp_mma.hpp"
#include "lib/error.hpp"

namespace roundscope::gpu::simt {
namespace {

constexpr int warp_size = 32;
// Blocks in flight at once: enough to let blocks overlap (as on a GPU), few enough that a
// grid of hundreds of blocks does not start tens of thousands of threads.
constexpr unsigned blocks_in_flight = 2;

thread_local Block* this_block = nullptr;

std::string& architecture() {
    static std::string arch = "sm90";
    return arch;
}

}  // namespace

// The A and B registers the lanes hand in (C stays with its lane: the C and D tables are the
// same), double-buffered by the parity of the warp's mma count: a
// lane writes one buffer while slower lanes may still read the other, so one barrier per
// mma.sync suffices (no lane can be two instructions ahead of another).
struct Block::Warp {
    struct Registers {
        std::uint32_t a[warp_size][4], b[warp_size][2];
    };
    std::barrier<> barrier{warp_size};
    Registers buffers[2];
    std::uint32_t exchange[2][warp_size];  // shuffles and votes, double-buffered the same way
};

Block::Block(unsigned threads_, std::size_t shared_bytes_)
    : threads(threads_),
      sync(threads_),
      arch(architecture()),
      warps(nullptr),
      shared_bytes(shared_bytes_),
      shared_storage_(new (std::align_val_t{1024}) std::byte[shared_bytes_ + 16]) {
    shared = shared_storage_;
    sync.set_shared(shared);
    warps = new Warp[(threads_ + warp_size - 1) / warp_size];
}

Block::~Block() {
    delete[] warps;
    ::operator delete[](shared_storage_, std::align_val_t{1024});
}

Block& current_block() { return *this_block; }

void set_simulated_architecture(std::string arch) { architecture() = std::move(arch); }
const std::string& simulated_architecture() { return architecture(); }

void run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body) {
    const unsigned threads = block.x * block.y * block.z;
    std::vector<dim3> blocks;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) blocks.push_back(dim3(x, y, z));
    for (std::size_t first = 0; first < blocks.size(); first += blocks_in_flight) {
        const std::size_t last = std::min(blocks.size(), first + blocks_in_flight);
        std::vector<std::unique_ptr<Block>> state;
        std::vector<std::thread> workers;
        for (std::size_t i = first; i < last; ++i) {
            state.push_back(std::make_unique<Block>(threads, shared_bytes));
            Block* shared = state.back().get();
            for (unsigned t = 0; t < threads; ++t) {
                const dim3 index(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                workers.emplace_back([=, &body] {
                    this_block = shared;
                    threadIdx = index, blockIdx = blocks[i], blockDim = block, gridDim = grid;
                    try {
                        body();
                        wgmma_check_finished();
                        tma_flush_stores();
                        shared->sync.finished(t);
                    } catch (const BlockFailed&) {
                        // the block's report is in shared->sync; run_grid throws it below. The
                        // thread leaves its warp's collective steps too: its lanes may be waiting
                        // at one (a wgmma's A fragment, a shuffle), which no watchdog sees.
                        shared->warps[t / warp_size].barrier.arrive_and_drop();
                    } catch (const Error& e) {
                        // the simulated hardware refused a request (a misaligned TMA tile, ...); the
                        // thread leaves its warp's collective steps, which its lanes would wait at
                        shared->warps[t / warp_size].barrier.arrive_and_drop();
                        shared->sync.refuse(t, e.what());
                    } catch (const std::exception& e) {
                        // Other exceptions are bugs of the kernel code: a simulated thread that
                        // throws one may leave its warp waiting in a collective step forever.
                        std::fprintf(stderr, "simulated GPU thread: %s\n", e.what());
                        std::abort();
                    }
                });
            }
        }
        for (std::thread& w : workers) w.join();
        for (std::size_t i = first; i < last; ++i) {
            const std::string failure = state[i - first]->sync.failure();
            if (!failure.empty())
                throw Error(fmt::format("simulated GPU, block ({}, {}, {}): {}", blocks[i].x, blocks[i].y, blocks[i].z,
                                        failure));
        }
    }
}

// ---- shuffles and votes --------------------------------------------------------------------
// Each is one barrier phase of the warp: a lane writes its value into the buffer of its
// exchange count's parity, waits for the warp, reads. As for mma.sync, a lane cannot be two
// collective steps ahead of another, so two buffers suffice, whatever the steps in between.

thread_local unsigned exchange_count = 0;

namespace {

// The warp's 32 values after the calling thread handed in `value`.
const std::uint32_t* exchanged(std::uint32_t value) {
    Block::Warp& warp = current_block().warps[threadIdx.x / warp_size];
    std::uint32_t* slots = warp.exchange[exchange_count++ & 1];
    slots[threadIdx.x % warp_size] = value;
    warp.barrier.arrive_and_wait();
    return slots;
}

}  // namespace

std::uint32_t warp_exchange(std::uint32_t value, int source) { return exchanged(value)[source & (warp_size - 1)]; }

std::array<std::uint32_t, 32> warp_gather(std::uint32_t value) {
    const std::uint32_t* lanes = exchanged(value);
    std::array<std::uint32_t, 32> out;
    std::copy(lanes, lanes + warp_size, out.begin());
    return out;
}

std::uint32_t shared_offset(const void* p) {
    const Block& b = current_block();
    const auto* at = static_cast<const std::byte*>(p);
    if (at < b.shared || at >= b.shared + b.shared_bytes)
        throw Error(fmt::format("a shared-memory address {} lies outside the block's {} bytes", p, b.shared_bytes));
    return static_cast<std::uint32_t>(at - b.shared);
}

std::uint32_t warp_ballot(bool predicate) {
    const std::uint32_t* lanes = exchanged(predicate ? 1u : 0u);
    std::uint32_t bits = 0;
    for (int lane = 0; lane < warp_size; ++lane) bits |= lanes[lane] << lane;
    return bits;
}

// ---- mma.sync ------------------------------------------------------------------------------
// The fragment tables of the PTX ISA (8.x, "Matrix fragments for mma.m16n8k16" with
// .bf16/.f16 and "mma.m16n8k32" with .e4m3/.e5m2), for groupID = lane / 4 and
// threadID_in_group = lane % 4. Element i of a fragment sits in register i / 2 (16-bit
// elements, low half first) or i / 4 (8-bit elements, low byte first).
namespace {

struct Position {
    int row, col;
};

Position a_element(bool fp8, int lane, int i) {
    const int group = lane >> 2, thread = lane & 3;
    if (fp8)  // a0..a15
        return {group + ((i >= 4 && i < 8) || i >= 12 ? 8 : 0), thread * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
    return {group + ((i >= 2 && i < 4) || i >= 6 ? 8 : 0), thread * 2 + (i & 1) + (i >= 4 ? 8 : 0)};  // a0..a7
}

Position b_element(bool fp8, int lane, int i) {  // (k, n)
    const int group = lane >> 2, thread = lane & 3;
    if (fp8) return {thread * 4 + (i & 3) + (i >= 4 ? 16 : 0), group};  // b0..b7
    return {thread * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};            // b0..b3
}

Position c_element(int lane, int i) {  // c0..c3, float32
    return {(lane >> 2) + (i >= 2 ? 8 : 0), (lane & 3) * 2 + (i & 1)};
}

std::uint32_t element_bits(std::uint32_t reg, bool fp8, int i) {
    return fp8 ? reg >> (8 * (i & 3)) & 0xFF : reg >> (16 * (i & 1)) & 0xFFFF;
}

// The tables inverted once: which lane and fragment element holds A(r, c) and B(k, n).
struct Holder {
    std::uint8_t lane = 0, element = 0;
};
struct Holders {
    Holder a[16][32], b[32][8];
};

Holders invert(bool fp8) {
    Holders h;
    const int per_register = fp8 ? 4 : 2;
    for (int lane = 0; lane < warp_size; ++lane) {
        for (int i = 0; i < 4 * per_register; ++i) {
            const Position p = a_element(fp8, lane, i);
            h.a[p.row][p.col] = {static_cast<std::uint8_t>(lane), static_cast<std::uint8_t>(i)};
        }
        for (int i = 0; i < 2 * per_register; ++i) {
            const Position p = b_element(fp8, lane, i);
            h.b[p.row][p.col] = {static_cast<std::uint8_t>(lane), static_cast<std::uint8_t>(i)};
        }
    }
    return h;
}

const Holders& holders(bool fp8) {
    static const Holders tables[2] = {invert(false), invert(true)};
    return tables[fp8 ? 1 : 0];
}

// The model of the block's architecture for `input`, looked up once per thread and input.
const emu::MmaModel& model_of(const Block& block, const emu::Format& input) {
    thread_local const Block* cached_block = nullptr;
    thread_local const emu::Format* cached_input = nullptr;
    thread_local const emu::MmaModel* cached = nullptr;
    if (cached_block != &block || cached_input != &input) {
        cached = emu::find_mma_model(block.arch, "mma.sync", input, input, emu::f32);
        if (cached == nullptr) {
            std::fprintf(stderr, "simulated GPU: no mma.sync model for %s inputs on %s\n",
                         std::string(input.name).c_str(), block.arch.c_str());
            std::abort();
        }
        cached_block = &block, cached_input = &input;
    }
    return *cached;
}

}  // namespace

// The lane's mma.sync count, for the buffer parity (each simulated thread is one host thread).
thread_local unsigned mma_count = 0;

void warp_mma(const emu::Format& input, std::uint32_t (&d)[4], const std::uint32_t (&a)[4],
              const std::uint32_t (&b)[2]) {
    Block& block = current_block();
    const int lane = static_cast<int>(threadIdx.x % warp_size);
    Block::Warp& warp = block.warps[threadIdx.x / warp_size];
    Block::Warp::Registers& r = warp.buffers[mma_count++ & 1];
    std::copy(a, a + 4, r.a[lane]);
    std::copy(b, b + 2, r.b[lane]);
    warp.barrier.arrive_and_wait();

    // This lane's D elements, from rows of A and columns of B gathered from the lanes that hold
    // them and C from its own registers.
    const emu::MmaModel& model = model_of(block, input);
    const bool fp8 = input.bits == 8;
    const int k = fp8 ? 32 : 16, per_register = fp8 ? 4 : 2;
    const Holders& h = holders(fp8);
    for (int i = 0; i < 4; ++i) {
        const Position p = c_element(lane, i);
        std::uint32_t row[32], column[32];
        for (int c = 0; c < k; ++c) {
            const Holder x = h.a[p.row][c], y = h.b[c][p.col];
            row[c] = element_bits(r.a[x.lane][x.element / per_register], fp8, x.element);
            column[c] = element_bits(r.b[y.lane][y.element / per_register], fp8, y.element);
        }
        d[i] = emu::mma_dot(model, row, column, 1, k, d[i]);
    }
}

std::array<std::uint32_t, 16 * 32> warp_a_matrix(const std::uint32_t* a, bool fp8) {
    const int lane = static_cast<int>(threadIdx.x % warp_size);
    Block::Warp& warp = current_block().warps[threadIdx.x / warp_size];
    Block::Warp::Registers& r = warp.buffers[mma_count++ & 1];  // a collective step as mma.sync's
    std::copy(a, a + 4, r.a[lane]);
    warp.barrier.arrive_and_wait();
    const Holders& h = holders(fp8);
    const int k = fp8 ? 32 : 16, per_register = fp8 ? 4 : 2;
    std::array<std::uint32_t, 16 * 32> m{};
    for (int row = 0; row < 16; ++row)
        for (int c = 0; c < k; ++c) {
            const Holder x = h.a[row][c];
            m[static_cast<std::size_t>(k * row + c)] =
                element_bits(r.a[x.lane][x.element / per_register], fp8, x.element);
        }
    return m;
}

}  // namespace roundscope::gpu::simt
