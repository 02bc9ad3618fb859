// The GEMM driver of the tensor-core models: decoding, the block schedule, threads, and the
// hand-off between the vector kernel and the scalar engine.
#include "emu/mma/mma_gemm.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "emu/mma/fused_dot_add.hpp"
#include "emu/mma/mma_gemm_simd.hpp"
#include "lib/parallel.hpp"

namespace roundscope::emu {
namespace {

// The k offsets of one instruction in block order, and where each block starts.
struct BlockSchedule {
    std::vector<int> order, block_begin;
};

BlockSchedule block_schedule(const MmaModel& m) {
    BlockSchedule s;
    if (m.k_order == KOrder::pair_interleaved) {
        for (int block = 0; block < 2; ++block) {
            s.block_begin.push_back(static_cast<int>(s.order.size()));
            for (int k = 0; k < m.k; ++k) {
                if (interleaved_block(k) == block) s.order.push_back(k);
            }
        }
    } else {
        for (int k = 0; k < m.k; ++k) {
            if (k % m.block_length == 0) s.block_begin.push_back(k);
            s.order.push_back(k);
        }
    }
    s.block_begin.push_back(static_cast<int>(s.order.size()));
    return s;
}

// An input element as the vector kernel reads it.
struct DecodedOperand {
    double value = 0;
    double exponent = zero_alignment_exponent;
    bool finite = true;
};

DecodedOperand decode_operand(const Format& f, std::uint32_t bits, int dropped_bits) {
    const Unpacked x = unpack(f, bits & ~((std::uint32_t{1} << dropped_bits) - 1));
    DecodedOperand out;
    if (x.cls == ValueClass::nan || x.cls == ValueClass::inf) {
        out.finite = false;
    } else if (x.cls == ValueClass::finite) {
        out.value = exact_double(x.negative, x.m, x.e);
        out.exponent = detail::alignment_exponent(f, x);
    }
    return out;
}

// Whether every value of f is a float32 value: the vector path holds inputs in floats.
bool values_are_float32(const Format& f) {
    return f.man_bits <= 23 && emin(f) - f.man_bits >= -149 &&
           decode(f, max_finite_bits(f)) <= static_cast<double>(std::numeric_limits<float>::max());
}

// Decodes through a table for formats of 16 bits or fewer whose values are float32 values. The
// table keeps a value as a float, its exponent as an int16 and whether it is finite, 448 KiB for
// 16-bit formats: small enough to stay in L2 cache. NaN and Inf decode as zeros.
class OperandDecoder {
public:
    OperandDecoder(const Format& f, int dropped_bits) : format_(f), dropped_(dropped_bits) {
        if (f.bits <= 16 && values_are_float32(f)) {
            const std::size_t size = std::size_t{1} << f.bits;
            value_.resize(size);
            exponent_.resize(size);
            finite_.resize(size);
            for (std::size_t bits = 0; bits < size; ++bits) {
                const DecodedOperand x = decode_operand(f, static_cast<std::uint32_t>(bits), dropped_bits);
                value_[bits] = static_cast<float>(x.value);
                exponent_[bits] = static_cast<std::int16_t>(x.exponent);
                finite_[bits] = x.finite;
            }
        }
    }
    DecodedOperand operator()(std::uint32_t bits) const {
        if (value_.empty()) return decode_operand(format_, bits, dropped_);
        const std::size_t at = bits & (value_.size() - 1);
        return {static_cast<double>(value_[at]), static_cast<double>(exponent_[at]), finite_[at] != 0};
    }

private:
    Format format_;
    int dropped_;
    std::vector<float> value_;
    std::vector<std::int16_t> exponent_;
    std::vector<char> finite_;
};

// Whether the vector kernel runs the model: float32 accumulators truncated, inputs that are
// float32 values (the rest goes to the scalar engine).
bool runs_vector_kernel(const MmaModel& m) {
    return m.accumulator == f32 && m.rounding != BlockRounding::rne_f16 && values_are_float32(m.a) &&
           values_are_float32(m.b);
}

// The vector kernel runs float32 accumulators only.
bool f32_finite(std::uint32_t bits) { return (bits & 0x7F800000u) != 0x7F800000u; }

}  // namespace

// What every GEMM of one model shares.
struct detail::GemmPlan {
    MmaModel model;
    BlockSchedule schedule;
    OperandDecoder decode_a, decode_b;
    bool vector_kernel;
    explicit GemmPlan(const MmaModel& m)
        : model(m),
          schedule(block_schedule(m)),
          decode_a(m.a, m.dropped_input_bits),
          decode_b(m.b, m.dropped_input_bits),
          vector_kernel(runs_vector_kernel(m)) {}
};

namespace {

struct GemmContext {
    const MmaModel& model;
    const GemmOperands& g;
    const BlockSchedule& schedule;
    const OperandDecoder &decode_a, &decode_b;
    bool vector_kernel;
    std::int64_t k_padded;
};

// One GEMM of the batch: the vector kernel for the columns it serves, then the scalar engine
// for the rest and for every element whose inputs hold NaN or Inf.
void gemm_one(const GemmContext& ctx, std::int64_t index, int threads) {
    const MmaModel& m = ctx.model;
    const GemmOperands& g = ctx.g;
    const std::uint32_t* a = g.a + index * g.m * g.k;
    const std::uint32_t* b = g.b + index * g.k * g.n;
    const std::uint32_t* c = g.c + index * g.m * g.n;
    std::uint32_t* d = g.d + index * g.m * g.n;
    auto reference = [&](std::int64_t i, std::int64_t j) {
        d[i * g.n + j] = mma_dot(m, a + i * g.k, b + j, static_cast<long>(g.n), static_cast<int>(g.k), c[i * g.n + j]);
    };
    if (!ctx.vector_kernel) {
        parallel_for(static_cast<std::size_t>(g.m), 16, threads, [&](std::size_t begin, std::size_t end) {
            for (auto i = static_cast<std::int64_t>(begin); i < static_cast<std::int64_t>(end); ++i) {
                for (std::int64_t j = 0; j < g.n; ++j) reference(i, j);
            }
        });
        return;
    }

    const std::int64_t kp = ctx.k_padded;
    std::vector<float> b_value(static_cast<std::size_t>(kp * g.n), 0.0f);
    std::vector<std::int32_t> b_exponent(b_value.size(), static_cast<std::int32_t>(zero_alignment_exponent));
    std::vector<char> column_finite(static_cast<std::size_t>(g.n), 1);
    for (std::int64_t k = 0; k < g.k; ++k) {
        for (std::int64_t j = 0; j < g.n; ++j) {
            const DecodedOperand x = ctx.decode_b(b[k * g.n + j]);
            b_value[k * g.n + j] = static_cast<float>(x.value);  // exact: see MmaSimdJob
            b_exponent[k * g.n + j] = static_cast<std::int32_t>(x.exponent);
            if (!x.finite) column_finite[j] = 0;
        }
    }
    // Rows go to the vector kernel a tile at a time, so that each strip of B is read from cache.
    constexpr std::int64_t tile_rows = 8;
    parallel_for(static_cast<std::size_t>(g.m), 16, threads, [&](std::size_t begin, std::size_t end) {
        std::vector<double> a_value(static_cast<std::size_t>(tile_rows * kp), 0.0);
        std::vector<double> a_exponent(a_value.size(), zero_alignment_exponent);
        bool row_finite[tile_rows];
        for (auto i0 = static_cast<std::int64_t>(begin); i0 < static_cast<std::int64_t>(end); i0 += tile_rows) {
            const std::int64_t rows = std::min(tile_rows, static_cast<std::int64_t>(end) - i0);
            for (std::int64_t r = 0; r < rows; ++r) {
                row_finite[r] = true;
                for (std::int64_t k = 0; k < g.k; ++k) {
                    const DecodedOperand x = ctx.decode_a(a[(i0 + r) * g.k + k]);
                    a_value[r * kp + k] = x.value;
                    a_exponent[r * kp + k] = x.exponent;
                    row_finite[r] = row_finite[r] && x.finite;
                }
            }
            // A row holding NaN or Inf goes through the vector kernel harmlessly (those elements
            // decode as zeros) and is then redone below by the scalar engine.
            const MmaSimdJob job{a_value.data(),
                                 a_exponent.data(),
                                 b_value.data(),
                                 b_exponent.data(),
                                 c + i0 * g.n,
                                 d + i0 * g.n,
                                 rows,
                                 g.n,
                                 kp,
                                 m.k,
                                 ctx.schedule.order.data(),
                                 ctx.schedule.block_begin.data(),
                                 static_cast<int>(ctx.schedule.block_begin.size()) - 1,
                                 m.alignment_bits,
                                 m.zero_exponent,
                                 m.rounding == BlockRounding::rz_e8m13,
                                 m.c_entry == AccumulatorEntry::added_after};
            const std::int64_t served = mma_row_simd(job);
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::int64_t i = i0 + r;
                for (std::int64_t j = 0; j < g.n; ++j) {
                    if (j >= served || !row_finite[r] || !column_finite[j] || !f32_finite(c[i * g.n + j])) {
                        reference(i, j);
                    }
                }
            }
        }
    });
}

}  // namespace

void mma_gemm_reference(const MmaModel& model, const GemmOperands& g, int threads) {
    const std::int64_t rows = g.batch * g.m;
    parallel_for(static_cast<std::size_t>(rows), 16, threads, [&](std::size_t begin, std::size_t end) {
        for (auto r = static_cast<std::int64_t>(begin); r < static_cast<std::int64_t>(end); ++r) {
            const std::int64_t index = r / g.m, i = r % g.m;
            const std::uint32_t* a = g.a + index * g.m * g.k + i * g.k;
            const std::uint32_t* b = g.b + index * g.k * g.n;
            for (std::int64_t j = 0; j < g.n; ++j) {
                const std::int64_t at = index * g.m * g.n + i * g.n + j;
                g.d[at] = mma_dot(model, a, b + j, static_cast<long>(g.n), static_cast<int>(g.k), g.c[at]);
            }
        }
    });
}

namespace {

// The plan of one of all_mma_models(), built once per process: the decoding tables take longer
// to build than a small tile takes to multiply, and an analysis (leak, attribute) runs the
// emulator hundreds of times. Any other model (a copy, changed) gets a plan of its own.
std::shared_ptr<const detail::GemmPlan> plan_for(const MmaModel& model) {
    const std::span<const MmaModel> table = all_mma_models();
    if (&model < table.data() || &model >= table.data() + table.size())
        return std::make_shared<detail::GemmPlan>(model);
    static std::mutex mutex;
    static std::vector<std::shared_ptr<const detail::GemmPlan>> plans(table.size());
    std::lock_guard<std::mutex> lock(mutex);
    auto& plan = plans[static_cast<std::size_t>(&model - table.data())];
    if (!plan) plan = std::make_shared<detail::GemmPlan>(model);
    return plan;
}

}  // namespace

PreparedMma::PreparedMma(const MmaModel& model) : plan_(plan_for(model)) {}
PreparedMma::~PreparedMma() = default;
PreparedMma::PreparedMma(PreparedMma&&) noexcept = default;
PreparedMma& PreparedMma::operator=(PreparedMma&&) noexcept = default;
const MmaModel& PreparedMma::model() const { return plan_->model; }

void PreparedMma::run(const GemmOperands& g, int threads) const {
    threads = resolve_threads(threads);
    const MmaModel& model = plan_->model;
    const GemmContext ctx{model,
                          g,
                          plan_->schedule,
                          plan_->decode_a,
                          plan_->decode_b,
                          plan_->vector_kernel,
                          (g.k + model.k - 1) / model.k * model.k};
    if (g.batch >= 2 * threads) {
        // Many small GEMMs (tiles): one thread per GEMM.
        parallel_for(static_cast<std::size_t>(g.batch), 8, threads, [&](std::size_t begin, std::size_t end) {
            for (std::size_t index = begin; index < end; ++index) gemm_one(ctx, static_cast<std::int64_t>(index), 1);
        });
    } else {
        for (std::int64_t index = 0; index < g.batch; ++index) gemm_one(ctx, index, threads);
    }
}

void mma_gemm(const MmaModel& model, const GemmOperands& g, int threads) { PreparedMma(model).run(g, threads); }

}  // namespace roundscope::emu
