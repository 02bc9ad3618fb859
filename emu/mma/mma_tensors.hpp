#pragma once
// MMA operands from a tensor file (A [T,M,K], B [T,K,N], C [T,M,N], optional D and dist, as
// in tests/data/golden): validated, with the model their dtypes and the architecture pick.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_model.hpp"
#include "lib/tensor.hpp"

namespace roundscope::emu {

struct MmaProblem {
    const MmaModel* model = nullptr;
    std::vector<std::uint32_t> a, b, c;
    std::optional<std::vector<std::uint32_t>> d;  // the file's D, when it has one
    std::vector<std::uint8_t> dist;               // the file's dist, when it has one
    std::int64_t batch = 1, m = 0, n = 0, k = 0;
    bool batched = false;  // A had a leading tile dimension

    GemmOperands operands(std::uint32_t* d_out) const { return {a.data(), b.data(), c.data(), d_out, batch, m, n, k}; }
};

/// Reads A, B and C (C absent: zeros of the accumulator `accumulator`, default f32) from
/// `file` and finds the model of `arch` and `instruction` (empty: mma.sync where it exists).
/// Throws Error naming the file and the tensor for a missing tensor, a wrong shape or dtype,
/// or a combination no model covers.
MmaProblem load_mma_problem(const TensorFile& file, std::string_view arch, std::string_view instruction);

/// Throws Error naming `arch` and the known architectures when no model has it.
void check_mma_architecture(std::string_view arch);

/// A model's D against the D a GPU wrote, bit for bit.
struct MmaCheck {
    struct Mismatch {
        std::int64_t tile, row, col;
        std::uint32_t c, expected, model;  // bits of the accumulator format
    };
    std::uint64_t matched = 0, total = 0;
    std::vector<Mismatch> first;                    // the first mismatches, in element order
    std::map<std::uint8_t, std::uint64_t> by_dist;  // mismatches by the tile's dist, where the file has one
};

/// `d` (the model's D) against `p.d`, keeping the first `keep` mismatches.
MmaCheck check_mma(const MmaProblem& p, const std::vector<std::uint32_t>& d, std::size_t keep = 10);

}  // namespace roundscope::emu
