#include "emu/attention/flash/tile_product.hpp"

#include <algorithm>

#include "emu/mma/amx_gemm.hpp"
#include "emu/mma/mkl_avx2_gemm.hpp"
#include "emu/numbers/f32_arith.hpp"
#include "emu/numbers/unpack.hpp"

namespace roundscope::emu::detail {

TileProduct::TileProduct(const AttentionRecipe& recipe, const Format& a, const Format& b, Product kind, bool packed)
    : a_(a), b_(b), kind_(kind), packed_(packed) {
    if (kind == Product::model) mma_.emplace(model_for(recipe, a, b));
}

void TileProduct::run(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, std::uint32_t* d,
                      std::uint64_t m, std::uint64_t n, std::uint64_t k) const {
    if (kind_ == Product::amx) {
        amx_bf16_gemm(a, b, c, d, m, n, k, amx_k_chunk(k, packed_));
        return;
    }
    if (kind_ == Product::avx512_bf16) {
        avx512_bf16_gemm(a, b, c, d, m, n, k);
        return;
    }
    if (kind_ == Product::mkl_avx2) {
        mkl_avx2_gemm(a_, a, b, c, d, m, n, k);
        return;
    }
    std::vector<std::uint32_t> zeros;
    if (c == nullptr) zeros.assign(m * n, 0), c = zeros.data();
    std::vector<std::uint32_t> out(m * n);
    if (kind_ == Product::ffma) {
        // Each element: C, then fma(A[i][t], B[t][j], acc) for t in order, in float32 (cuBLAS's
        // SIMT SGEMM, each thread's FFMA chain over k).
        std::vector<float> fa(m * k), fb(k * n), acc(n);
        for (std::uint64_t x = 0; x < m * k; ++x) fa[x] = static_cast<float>(decode(a_, a[x]));
        for (std::uint64_t x = 0; x < k * n; ++x) fb[x] = static_cast<float>(decode(b_, b[x]));
        for (std::uint64_t i = 0; i < m; ++i) {
            for (std::uint64_t j = 0; j < n; ++j) acc[j] = float_from_bits(c[i * n + j]);
            for (std::uint64_t t = 0; t < k; ++t) {
                const float x = fa[i * k + t];
                const float* row = fb.data() + t * n;
                for (std::uint64_t j = 0; j < n; ++j) acc[j] = f32_arith::fma(x, row[j], acc[j]);
            }
            for (std::uint64_t j = 0; j < n; ++j) out[i * n + j] = bits_of(acc[j]);
        }
    } else if (mma_) {
        GemmOperands g;
        g.a = a, g.b = b, g.c = c, g.d = out.data();
        g.m = static_cast<std::int64_t>(m), g.n = static_cast<std::int64_t>(n), g.k = static_cast<std::int64_t>(k);
        mma_->run(g, 1);
    } else {
        // Each element: C, then + A[i][t] B[t][j] for t in order, in double. The operands are
        // decoded once and a row's elements advance together (the same operations per element).
        std::vector<double> da(m * k), db(k * n), sum(n);
        for (std::uint64_t x = 0; x < m * k; ++x) da[x] = decode(a_, a[x]);
        for (std::uint64_t x = 0; x < k * n; ++x) db[x] = decode(b_, b[x]);
        for (std::uint64_t i = 0; i < m; ++i) {
            for (std::uint64_t j = 0; j < n; ++j) sum[j] = static_cast<double>(float_from_bits(c[i * n + j]));
            for (std::uint64_t t = 0; t < k; ++t) {
                const double x = da[i * k + t];
                const double* row = db.data() + t * n;
                for (std::uint64_t j = 0; j < n; ++j) sum[j] += x * row[j];
            }
            for (std::uint64_t j = 0; j < n; ++j) out[i * n + j] = bits_of(static_cast<float>(sum[j]));
        }
    }
    std::copy(out.begin(), out.end(), d);
}

std::vector<std::uint32_t> transposed(const std::uint32_t* x, std::uint64_t rows, std::uint64_t stride, Span cols) {
    std::vector<std::uint32_t> t(cols.size() * rows);
    for (std::uint64_t r = 0; r < rows; ++r) {
        for (std::uint64_t c = cols.begin; c < cols.end; ++c) t[(c - cols.begin) * rows + r] = x[r * stride + c];
    }
    return t;
}

}  // namespace roundscope::emu::detail
