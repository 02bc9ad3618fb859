// The mma.sync probe kernel compiled for the simulated GPU (gpu/probes/mma_sync_probe.cuh).
#include "gpu/probes/mma_probe_host.hpp"

#include "gpu/probes/mma_sync_probe.cuh"

namespace roundscope::gpu::simt {

std::vector<std::uint32_t> run_mma_sync_probe(const emu::Format& input, const std::vector<std::uint32_t>& a,
                                              const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                              std::int64_t tiles) {
    return run_mma_sync_tiles(input_of(input), a, b, c, tiles);
}

}  // namespace roundscope::gpu::simt
