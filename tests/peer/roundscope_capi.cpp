// C entry points to the batch casts, the tensor-core models, the models of torch.compile's exp and
// log and the H100's MUFU, so that tests in Python can put roundscope beside peer implementations
// (ml_dtypes over all 2^32 float32 inputs; MMA-Sim on random tiles; Inductor's code; the numpy
// flash forward, which takes the MUFU as the hardware's own function). Test-only; not installed.
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>

#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/batch/batch_cast.hpp"
#include "emu/mma/mma_gemm.hpp"
#include "emu/mma/mma_model.hpp"
#include "emu/mufu/h100_mufu.hpp"
#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "lib/fma_clones.hpp"

namespace {

// out[begin..end) of roundscope_inductor_math: the models are fused multiply-adds.
ROUNDSCOPE_FMA_CLONES void inductor_math_part(int function, const float* in, float* out, std::size_t begin,
                                              std::size_t end) {
    using namespace roundscope::emu;
    for (std::size_t i = begin; i < end; ++i)
        out[i] = function == 0   ? inductor::expf(in[i])
                 : function == 1 ? inductor::logf(in[i])
                                 : inductor::logf_avx2(in[i]);
}

}  // namespace

extern "C" {

/// Casts n floats into `format` under `convention`; saturate: 0 or 1 overrides the
/// convention, -1 keeps it. `out` holds n elements of storage_bytes(format) bytes.
/// Returns 0, or -1 for an unknown format or convention.
int roundscope_cast_f32(const float* in, std::size_t n, const char* format, const char* convention, int saturate,
                        void* out) {
    using namespace roundscope::emu;
    const Format* f = find_format(format);
    const auto c = parse_convention(convention);
    if (f == nullptr || !c) return -1;
    CastOptions o = convention_options(*c, *f);
    if (saturate >= 0) o.saturate = saturate != 0;
    const std::span<const float> input(in, n);
    switch (storage_bytes(*f)) {
        case 1:
            cast_batch(input, *f, o, std::span<std::uint8_t>(static_cast<std::uint8_t*>(out), n));
            break;
        case 2:
            cast_batch(input, *f, o, std::span<std::uint16_t>(static_cast<std::uint16_t*>(out), n));
            break;
        case 4:
            cast_batch(input, *f, o, std::span<std::uint32_t>(static_cast<std::uint32_t*>(out), n));
            break;
        default:
            cast_batch(input, *f, o, std::span<std::uint64_t>(static_cast<std::uint64_t*>(out), n));
            break;
    }
    return 0;
}

/// D = A*B + C for `batch` row-major GEMMs through the model of `arch` and `instruction` with
/// these input and accumulator format names, one bit pattern per uint32. Returns 0, or -1 when
/// no model matches.
int roundscope_mma(const char* arch, const char* instruction, const char* a_format, const char* b_format,
                   const char* accumulator, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                   std::uint32_t* d, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
    using namespace roundscope::emu;
    const Format* fa = find_format(a_format);
    const Format* fb = find_format(b_format);
    const Format* fc = find_format(accumulator);
    if (fa == nullptr || fb == nullptr || fc == nullptr) return -1;
    const MmaModel* model = find_mma_model(arch, instruction, *fa, *fb, *fc);
    if (model == nullptr) return -1;
    mma_gemm(*model, GemmOperands{a, b, c, d, batch, m, n, k}, 0);
    return 0;
}

/// out[i] = an H100's ex2.approx.ftz (function 0), lg2.approx.ftz (1) or rcp.approx.ftz (2) of
/// in[i] (emu/mufu/h100_mufu.hpp: bit-exact with the hardware on all 2^32 inputs). Returns 0, or
/// -1 for another function.
int roundscope_h100_mufu(int function, const float* in, std::size_t n, float* out) {
    using namespace roundscope::emu;
    float (*const units[])(float) = {h100_ex2_ftz, h100_lg2_ftz, h100_rcp_ftz};
    if (function < 0 || function > 2) return -1;
    for (std::size_t i = 0; i < n; ++i) out[i] = units[function](in[i]);
    return 0;
}

/// out[i] = exp (function 0) or log (function 1) of in[i] as torch.compile's AVX-512 code
/// computes them, or log as its AVX2 code does (function 2; its exp is AVX-512's)
/// (inductor_cpu_math.hpp), on two threads. Returns 0, or -1 for another function.
int roundscope_inductor_math(int function, const float* in, std::size_t n, float* out) {
    if (function < 0 || function > 2) return -1;
    std::thread half(inductor_math_part, function, in, out, 0, n / 2);
    inductor_math_part(function, in, out, n / 2, n);
    half.join();
    return 0;
}
}
