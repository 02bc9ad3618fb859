#pragma once
// D = A*B + C through a tensor-core model (mma_model.hpp), for one tile or a whole batch of
// GEMMs. Two paths, one result:
//   mma_gemm_reference  every element through the scalar engine (fused_dot_add.hpp);
//   mma_gemm            the same model on vectors of doubles (mma_gemm_simd.cpp), multi-threaded,
//                       with the scalar engine for the elements the vectors do not serve
//                       (NaN/Inf inputs, FP16 accumulators, the last columns of a row).
// tests/emu/mma/test_mma_gemm.cpp checks that the two agree bit for bit.
#include <cstdint>
#include <memory>

#include "emu/mma/mma_model.hpp"

namespace roundscope::emu {

/// Row-major operands, each element one bit pattern in a uint32 (the model's input format for
/// A and B, its accumulator format for C and D). `batch` GEMMs lie one after another.
struct GemmOperands {
    const std::uint32_t* a = nullptr;  // [batch][m][k]
    const std::uint32_t* b = nullptr;  // [batch][k][n]
    const std::uint32_t* c = nullptr;  // [batch][m][n]
    std::uint32_t* d = nullptr;        // [batch][m][n], not overlapping c
    std::int64_t batch = 1, m = 0, n = 0, k = 0;
};

/// K is taken in chunks of the instruction's k; a last partial chunk acts as if padded with zeros.
void mma_gemm_reference(const MmaModel& model, const GemmOperands& g, int threads = 1);
void mma_gemm(const MmaModel& model, const GemmOperands& g, int threads = 0);

namespace detail {
struct GemmPlan;
}

/// A model made ready for many GEMMs (the flash-attention emulator's tiles): its operand
/// decoding tables and block schedule are built once. The same bits as mma_gemm; run() may be
/// called from several threads at once.
class PreparedMma {
public:
    explicit PreparedMma(const MmaModel& model);
    ~PreparedMma();
    PreparedMma(PreparedMma&&) noexcept;
    PreparedMma& operator=(PreparedMma&&) noexcept;
    const MmaModel& model() const;
    void run(const GemmOperands& g, int threads = 1) const;

private:
    std::shared_ptr<const detail::GemmPlan> plan_;  // shared by every PreparedMma of a listed model
};

}  // namespace roundscope::emu
