#include "emu/attention/flash/flash_context.hpp"

#include <array>
#include <cmath>

#include <fmt/format.h>

#include <cstring>

#include "emu/attention/flash/aten_gemv.hpp"
#include "emu/attention/math/inductor_cpu_math.hpp"
#include "emu/attention/softmax/attention_steps.hpp"
#include "emu/attention/softmax/compiled_torch_softmax.hpp"
#include "emu/batch/tensor_cast.hpp"
#include "emu/block/block_quantize.hpp"
#include "emu/mma/mkl_avx2_gemm.hpp"
#include "emu/numbers/round.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/dtype.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

std::vector<Span> blocks_of(std::uint64_t n, int block, KvOrder order) {
    std::vector<Span> out;
    const auto b = static_cast<std::uint64_t>(block);
    for (std::uint64_t begin = 0; begin < n; begin += b) out.push_back({begin, std::min(n, begin + b)});
    if (order == KvOrder::reverse) std::reverse(out.begin(), out.end());
    return out;
}

std::uint64_t FlashContext::visible(std::uint64_t i) const { return visible_keys(shape, i); }

// The last row's band ends last and the first row's starts first (rows are ascending in
// position): the tile is skipped when it lies past the one or before the other.
bool FlashContext::tile_masked(Span rows, Span keys) const {
    return keys.begin >= key_band(shape, rows.end - 1).end || keys.end <= key_band(shape, rows.begin).begin;
}

std::vector<float> FlashContext::tile_mask(std::uint64_t head, Span rows, Span keys) const {
    if (!has_key_bias(shape)) return {};
    std::vector<float> mask(rows.size() * keys.size());
    for (std::uint64_t r = 0; r < rows.size(); ++r) {
        const std::uint64_t i = rows.begin + r, position = query_position(shape, i);
        const KeyRange band = key_band(shape, i);
        for (std::uint64_t j = 0; j < keys.size(); ++j) {
            const std::uint64_t key = keys.begin + j;
            // past the band's end: masked by `visible` in the row steps
            mask[r * keys.size() + j] = key >= band.begin
                                            ? static_cast<float>(shape.mask->dense_at(head, position, key))
                                            : steps::minus_infinity();
        }
    }
    return mask;
}

std::vector<float> FlashContext::tile_bias(std::uint64_t head, Span rows, Span keys) const {
    std::vector<float> bias = tile_mask(head, rows, keys);
    for (float& b : bias)
        if (b != 0.0f && b != steps::minus_infinity()) b = f32_arith::mul(b, steps::log2e);
    return bias;
}

bool FlashContext::diagonal_key(std::uint64_t i, std::uint64_t j) const {
    const std::uint64_t n_q = problem_rows(shape);
    return steps::diagonal_key(query_position(shape, i), j, n_q, shape.n_kv, recipe.p_and_v.v_block);
}

namespace {

// The compiled softmax past one KV bucket divides O by a row sum whose form Inductor's fusion
// chose per row block (compiled_torch_softmax.hpp): known for the released code's buckets of 512
// queries and keys, as many row blocks as buckets, up to five of them; anything else refused.
void check_compiled_buckets(const FlashContext& ctx) {
    const AttentionShape& s = ctx.shape;
    const AttentionRecipe& r = ctx.recipe;
    const std::uint64_t buckets = ctx.kv_buckets();
    if (buckets <= 1) return;
    const std::string why = fmt::format(
        "recipe '{}': past one KV bucket ({} keys over block_n = {}) the compiled softmax is modelled for "
        "the released code's buckets as Inductor fuses them: ",
        r.name, s.n_kv, r.tiles.block_n);
    if (r.tiles.block_m != 512 || r.tiles.block_n != 512)
        throw Error(why + fmt::format("block_m = block_n = 512 (here {} and {})", r.tiles.block_m, r.tiles.block_n));
    if (s.n_q != s.n_kv) throw Error(why + fmt::format("as many queries as keys (here {} and {})", s.n_q, s.n_kv));
    if (buckets > torch_compiled::max_measured_buckets)
        throw Error(why + fmt::format("up to {} buckets ({} keys) were measured; {} were not",
                                      torch_compiled::max_measured_buckets, torch_compiled::max_measured_buckets * 512,
                                      buckets));
}

// A mask the recipe's softmax cannot take: refused, naming the recipe and the reason.
void check_mask(const FlashContext& ctx) {
    const AttentionShape& s = ctx.shape;
    const AttentionRecipe& r = ctx.recipe;
    if (s.softcap != 0 && (r.softmax.kind != SoftmaxKind::online || r.output.epilogue != Epilogue::fa2))
        throw Error(
            fmt::format("recipe '{}': soft-capped scores (softcap = {}) are FlashAttention's (the online "
                        "softmax with its own epilogue); this recipe's kernel takes none",
                        r.name, s.softcap));
    if (s.softcap != 0 &&
        (r.scores.scale_log2 == ScaleLog2::scale_first || r.backward.schedule == GradSchedule::mem_eff))
        throw Error(
            fmt::format("recipe '{}': soft-capped scores are FlashAttention's; scale_log2=scale-first is the "
                        "memory-efficient kernel's, which caps none",
                        r.name));
    if (!has_key_bias(s)) return;  // a prefix of the keys, which every softmax takes
    if (r.softmax.kind == SoftmaxKind::online_torch || r.softmax.kind == SoftmaxKind::compiled_torch)
        throw Error(
            fmt::format("recipe '{}': the released PyTorch attention it models takes only its causal mask, "
                        "not a {} (the other recipes take it)",
                        r.name, s.mask->describe(false)));
    bool additive = false;
    for (const DenseMask& m : s.mask->dense) {
        m.check_values("");
        additive = additive || m.has_finite_nonzero();
    }
    if (additive && (r.softmax.exp2_arg == Exp2Arg::fma || r.softmax.rescale_arg == RescaleArg::raw))
        throw Error(
            fmt::format("recipe '{}' forms exp2's argument from the raw scores (exp2_arg=fma or "
                        "rescale_arg=raw), as kernels without an additive mask do; an additive mask with "
                        "values other than 0 and -inf has no such form (a boolean mask has)",
                        r.name));
    if (additive && (r.scores.scale_log2 == ScaleLog2::scale_first || r.backward.schedule == GradSchedule::mem_eff))
        throw Error(
            fmt::format("recipe '{}': an additive mask with values other than 0 and -inf is added to S scale "
                        "before log2 e by the memory-efficient kernel (scale_log2=scale-first), which is not "
                        "modelled; a boolean mask (0 and -inf) is",
                        r.name));
}

// need_pack's ratio at `threads` threads, in ATen's arithmetic (int64 counts, double sizes).
double aten_pack_ratio(const AttentionShape& s, std::uint64_t n_q, std::int64_t threads) {
    const auto q_block = static_cast<std::int64_t>(aten_query_block(n_q));
    const auto q_slices = (static_cast<std::int64_t>(n_q) + q_block - 1) / q_block;
    const auto heads = static_cast<std::int64_t>(s.heads), kv_heads = heads / static_cast<std::int64_t>(s.kv_group);
    const auto n_kv = static_cast<std::int64_t>(s.n_kv), d = static_cast<std::int64_t>(s.d);
    const auto pack_size = static_cast<double>(kv_heads * n_kv * d);
    const auto per_thread = static_cast<double>((heads * q_slices + threads - 1) / threads);
    const std::int64_t keys = s.causal ? std::min(static_cast<std::int64_t>(n_q), n_kv) : n_kv;
    return per_thread * static_cast<double>(q_block) * static_cast<double>(keys) * static_cast<double>(d) / pack_size;
}

// oneDNN's one-row and one-key GEMMs run its GEMV (aten_gemv.hpp), modelled on AVX512-BF16 and
// refused on AMX's unpacked path, where nobody has checked it (the same kernel, untested). On the
// packed path brgemm takes a one-row or one-key block like any other.
void check_amx_shape(const FlashContext& ctx) {
    const AttentionRecipe& r = ctx.recipe;
    if ((r.scores.product != Product::amx && r.p_and_v.product != Product::amx) || ctx.aten_packed) return;
    if (detail::aten_one_row_block(ctx.shape))
        throw Error(
            fmt::format("recipe '{}': {} query rows leave ATen a one-row block of queries, whose GEMM the BLAS "
                        "runs as a GEMV, modelled on AVX512-BF16 (avx512-bf16) and untested on AMX",
                        r.name, problem_rows(ctx.shape)));
    if (detail::aten_one_key_block(r, ctx.shape))
        throw Error(
            fmt::format("recipe '{}': {} keys leave a KV block of one key (block_n = {}), whose GEMM the BLAS "
                        "runs as a GEMV, modelled on AVX512-BF16 (avx512-bf16) and untested on AMX",
                        r.name, ctx.shape.n_kv, r.tiles.block_n));
}

// MKL's AVX2 kernel (mkl_avx2_gemm.hpp) is modelled for GEMMs of at least 24 x 4 (BF16, FP16; an
// SGEMM's edge is its own) column-major, as ATen calls them: S is keys x queries, P V is D x
// queries. Query blocks are ATen's (32, 64 or 256 rows, the last what is left); KV blocks are 512
// keys and the rest, whole even under the causal mask (which masks inside a block), so the last
// KV block counts where some query block reaches it.
void check_mkl_avx2_shape(const FlashContext& ctx) {
    const AttentionRecipe& r = ctx.recipe;
    const bool scores = r.scores.product == Product::mkl_avx2, pv = r.p_and_v.product == Product::mkl_avx2;
    const AttentionShape& s = ctx.shape;
    const std::uint64_t n_q = problem_rows(s);
    if (!(scores || pv) || n_q == 0 || s.n_kv == 0) return;
    if (r.softmax.kind == SoftmaxKind::aten_cpu_math) {
        // the math path: one batched SGEMM each for S (keys x all queries) and P V (D_v x all queries)
        std::string why;
        if (scores && !mkl_avx2_modelled(f32, s.n_kv, n_q))
            why = fmt::format("S's GEMM has {} x {} (keys x queries)", s.n_kv, n_q);
        else if (pv && !mkl_avx2_modelled(f32, s.d_v, n_q))
            why = fmt::format("P V's GEMM has {} x {} (D_v x queries)", s.d_v, n_q);
        if (!why.empty())
            throw Error(
                fmt::format("recipe '{}': {}, an SGEMM MKL runs with kernels other than the AVX2 one "
                            "mkl-avx2 models ({})",
                            r.name, why, mkl_avx2_modelled_shapes(f32)));
        return;
    }
    const Format& in = *r.target.input;
    const std::uint64_t q_block = aten_query_block(n_q);
    const std::uint64_t rows = std::min(q_block, n_q % q_block == 0 ? q_block : n_q % q_block);
    const auto block_n = static_cast<std::uint64_t>(r.tiles.block_n);
    const std::uint64_t last_keys = s.n_kv % block_n == 0 ? block_n : s.n_kv % block_n;
    // ATen's causal rows stop at min(query block's end, keys): the last KV block is reached when
    // the last query block's end passes its start
    const bool last_reached = !s.causal || std::min(n_q, s.n_kv) > s.n_kv - last_keys;
    const std::uint64_t keys = last_reached ? last_keys : block_n;
    std::string why;
    if (scores && !mkl_avx2_modelled(in, keys, rows))
        why = fmt::format("S's GEMM has {} x {} (keys x queries: {} keys, block_n = {}, and {} query rows)", keys, rows,
                          s.n_kv, block_n, n_q);
    else if (pv && !mkl_avx2_modelled(in, s.d_v, rows))
        why = fmt::format("P V's GEMM has {} x {} (D x queries: {} query rows)", s.d_v, rows, n_q);
    if (!why.empty())
        throw Error(
            fmt::format("recipe '{}': {}, a GEMM MKL runs on {} with kernels other than the AVX2 one "
                        "mkl-avx2 models ({})",
                        r.name, why, in.name, mkl_avx2_modelled_shapes(in)));
}

}  // namespace

std::uint64_t aten_query_block(std::uint64_t n_q) {
    const std::uint64_t split = n_q >= 768 ? 256 : n_q >= 192 ? 64 : 32;
    return std::min(split, n_q);
}

bool aten_packed(const AttentionRecipe& r, const AttentionShape& s) {
    if (r.scores.product != Product::amx && r.p_and_v.product != Product::amx) return false;
    const std::uint64_t n_q = problem_rows(s);
    if (n_q < 64 || s.n_kv < 64) return false;
    if (r.tiles.aten_threads > 0) return aten_pack_ratio(s, n_q, r.tiles.aten_threads) >= 4;
    // the ratio falls as threads are added, from one thread to so many that each has one block
    const bool few = aten_pack_ratio(s, n_q, 1) >= 4, many = aten_pack_ratio(s, n_q, 1LL << 40) >= 4;
    if (few != many)
        throw Error(
            fmt::format("recipe '{}': whether ATen packs its GEMM operands for this shape depends on its "
                        "thread count: set aten_threads to the run's torch.get_num_threads()",
                        r.name));
    return few;
}

FlashContext flash_context(const AttentionRecipe& recipe, const AttentionShape& shape) {
    validate(recipe);
    FlashContext ctx{recipe, shape};
    ctx.recipe.tiles.block_n = resolved_block_n(recipe, shape.d);
    if (recipe.tiles.block_n <= 0) validate(ctx.recipe);  // the resolved tile against the V blocks
    if (recipe.tiles.split_kv_sms > 0) {
        ctx.splits =
            torch_flash_splits(launched_heads(shape), shape.n_q, shape.n_kv, shape.d, recipe.tiles.split_kv_sms);
        if (ctx.splits > 1 &&
            (recipe.output.epilogue != Epilogue::torch_flash || recipe.softmax.kind != SoftmaxKind::online))
            throw Error(
                fmt::format("recipe '{}': split_kv_sms is PyTorch's flash path: it needs epilogue=torch-flash "
                            "and the online softmax",
                            recipe.name));
    }
    if (recipe.tiles.kv_splits > 1) ctx.splits = recipe.tiles.kv_splits;  // a fixed split (validate: online)
    if (recipe.softmax.kind == SoftmaxKind::compiled_torch) check_compiled_buckets(ctx);
    if (recipe.softmax.kind == SoftmaxKind::cuda_math && shape.n_kv > 1024)
        throw Error(
            fmt::format("recipe '{}': PyTorch's math path is modelled for rows of up to 1024 keys "
                        "(softmax_warp_forward); {} keys take ATen's block softmax, which is not modelled",
                        recipe.name, shape.n_kv));
    check_mask(ctx);
    if (recipe.softmax.kind == SoftmaxKind::aten_cpu && shape.d != shape.d_v)
        throw Error(fmt::format(
            "recipe '{}': V's head dimension ({}) differs from Q's and K's ({}): there "
            "F.scaled_dot_product_attention runs PyTorch's math path on the CPU, not the flash kernel this recipe "
            "models (the recipe torch-cpu-math models that path)",
            recipe.name, shape.d_v, shape.d));
    ctx.aten_packed = aten_packed(ctx.recipe, shape);
    check_amx_shape(ctx);
    check_mkl_avx2_shape(ctx);
    const float scale = static_cast<float>(shape.scale);
    ctx.scale_log2 = recipe.scores.scale_log2 == ScaleLog2::float64
                         ? static_cast<float>(static_cast<double>(scale) * 1.4426950408889634074)  // M_LOG2E
                         : steps::scale_log2(scale);
    if (recipe.scores.scale_log2 == ScaleLog2::scale_first) ctx.score_prescale = scale, ctx.scale_log2 = steps::log2e;
    if (shape.softcap != 0) {  // the softmax's constant is the cap's
        ctx.softcapped = true;
        ctx.softcap = softcap_constants(scale, static_cast<float>(shape.softcap));
        ctx.scale_log2 = ctx.softcap.scale_log2;
    }
    ctx.exp2 = recipe.softmax.exp2;
    // under p_quant the row step leaves P * S in float32 for the block quantization
    const Format& p_step = recipe.p_and_v.p_quant != nullptr ? f32 : *recipe.p_and_v.p_format;
    ctx.softmax = {ctx.scale_log2,
                   ctx.exp2,
                   recipe.softmax.max_adjust,
                   recipe.softmax.max_adjust_beta,
                   recipe.p_and_v.p_scale,
                   p_step,
                   recipe.softmax.rescale_arg,
                   recipe.softmax.row_sum,
                   recipe.softmax.exp2_arg,
                   recipe.softmax.max_offset};
    ctx.torch = {static_cast<float>(shape.scale),  recipe.softmax.format,
                 &recipe.softmax.stored_row_sum(), recipe.softmax.max_adjust,
                 recipe.softmax.max_adjust_beta,   recipe.p_and_v.p_scale,
                 recipe.p_and_v.p_format,          cpu_vector_lanes(recipe.target.cpu_vector)};
    return ctx;
}

std::vector<std::uint32_t> exact_in(const std::vector<std::uint32_t>& x, const Format& from, const Format& to,
                                    const char* what) {
    if (from == to) return x;
    std::vector<std::uint32_t> out(x.size());
    const CastOptions o;
    const bool from_f32 = from == f32;  // the usual case
    if (from_f32 && shares_f32_exponent(to)) {
        // exact in float32's top bits: the dropped bits are zero, and those bits are the value's
        const int drop = 23 - to.man_bits;
        for (std::size_t i = 0; i < x.size(); ++i) {
            if ((x[i] & ((1u << drop) - 1)) != 0 && !is_nan_bits(from, x[i]))
                throw Error(
                    fmt::format("{}: element {} ({}) is not exact in {}", what, i, decode(from, x[i]), to.name));
            out[i] = static_cast<std::uint32_t>(cast_from_f32(float_from_bits(x[i]), to, o));
        }
        return out;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
        out[i] = static_cast<std::uint32_t>(from_f32 ? cast_from_f32(float_from_bits(x[i]), to, o)
                                                     : convert(from, x[i], to, o));
        if (decode(to, out[i]) != decode(from, x[i]) && !is_nan_bits(from, x[i]))
            throw Error(fmt::format("{}: element {} ({}) is not exact in {}", what, i, decode(from, x[i]), to.name));
    }
    return out;
}

const MmaModel& model_for(const AttentionRecipe& r, const Format& x, const Format& y) {
    const MmaModel* m = find_mma_model(r.target.arch, r.target.instruction, x, y, f32);
    if (m == nullptr)
        throw Error(fmt::format("recipe '{}': no {} {} model for {} x {}", r.name, r.target.arch, r.target.instruction,
                                x.name, y.name));
    return *m;
}

namespace {

// How a GPU kernel's preprocessing sums a row's delta over threads: thread t an FFMA chain over
// features 8t to 8t + 7 of every page of 8 x threads features, page after page (features past n
// zeros); then the threads' sums joined by butterfly shuffles, thread 0's kept.
struct ThreadsDelta {
    int threads;              // threads a row: 2, 4 or 8
    int features;             // features summed, a multiple of the page (zeros past the row's n)
    bool first_multiply;      // the chain's first operation a multiply (where FFMAs onto +0 would hide -0)
    bool offsets_descending;  // butterfly offsets threads / 2 down to 1, or 1 up to threads / 2
};

float threads_delta(const AttentionRecipe& recipe, const std::uint32_t* d_o, const std::uint32_t* o,
                    const Format& o_format, int n, const ThreadsDelta& how) {
    const int page = 8 * how.threads;
    std::array<float, 8> sum{};
    for (int t = 0; t < how.threads; ++t) {
        for (int p = 0; p < how.features / page; ++p) {
            for (int e = 0; e < 8; ++e) {
                const int c = p * page + 8 * t + e;
                const float x = c < n ? static_cast<float>(decode(*recipe.target.input, d_o[c])) : 0.0f;
                const float y = c < n ? static_cast<float>(decode(o_format, o[c])) : 0.0f;
                sum[t] = how.first_multiply && p == 0 && e == 0 ? f32_arith::mul(x, y) : f32_arith::fma(x, y, sum[t]);
            }
        }
    }
    const auto join = [&](int offset) {
        std::array<float, 8> next{};
        for (int t = 0; t < how.threads; ++t) next[t] = f32_arith::add(sum[t], sum[t ^ offset]);
        sum = next;
    };
    if (how.offsets_descending)
        for (int offset = how.threads / 2; offset >= 1; offset /= 2) join(offset);
    else
        for (int offset = 1; offset < how.threads; offset *= 2) join(offset);
    return sum[0];
}

// FlashAttention-2's dot_do_o (flash_bwd_preprocess_kernel.h): pages of 64 features over 8
// threads (32 over 4 where the kernel's head dimension is not a multiple of 64), up to the
// kernel's head dimension; the first operation a multiply; offsets 4, 2, 1.
ThreadsDelta fa2_threads(const AttentionRecipe& recipe, int n) {
    const int head_dim = flash_head_dim(recipe, static_cast<std::uint64_t>(n));
    return {head_dim % 64 == 0 ? 8 : 4, head_dim, true, true};
}

// The memory-efficient backward's computeDelta (kernel_backward.h, 128-bit loads of 8 elements):
// 2 threads a row where D <= 64 (128 threads over 64 rows), 4 above; chains from +0 (which never
// hold -0, so the zero features past n change nothing); offsets 1, then 2.
ThreadsDelta mem_eff_threads(int n) {
    const int threads = n <= 64 ? 2 : 4, page = 8 * threads;
    return {threads, (n + page - 1) / page * page, false, false};
}

}  // namespace

float recipe_delta_row(const AttentionRecipe& recipe, const std::uint32_t* d_o, const std::uint32_t* o,
                       const Format& o_format, int n) {
    if (recipe.backward.delta_sum == DeltaSum::fa2_threads)
        return threads_delta(recipe, d_o, o, o_format, n, fa2_threads(recipe, n));
    if (recipe.backward.delta_sum == DeltaSum::mem_eff_threads)
        return threads_delta(recipe, d_o, o, o_format, n, mem_eff_threads(n));
    if (recipe.backward.delta_sum == DeltaSum::sequential)
        return steps::delta_rowsum(d_o, *recipe.target.input, o, o_format, n, *recipe.backward.delta_format);
    std::vector<float> products(static_cast<std::size_t>(n));
    for (int c = 0; c < n; ++c)  // float32 products, as Inductor's (exact for BF16 dO and O)
        products[c] = f32_arith::mul(static_cast<float>(decode(*recipe.target.input, d_o[c])),
                                     static_cast<float>(decode(o_format, o[c])));
    const int vector = cpu_vector_lanes(recipe.target.cpu_vector);
    return inductor::lane_sum(products.data(), products.size(),
                              recipe.backward.delta_sum == DeltaSum::lanes32 ? 2 * vector : vector, vector);
}

std::vector<float> delta_from_o(const FlashContext& ctx, const AttentionOperands& in, const ForwardResult& forward) {
    const AttentionShape& sh = ctx.shape;
    const bool stored = ctx.recipe.backward.delta == DeltaKind::stored_o;
    std::vector<float> delta(sh.heads * sh.n_q);
    std::vector<std::uint32_t> o(sh.d_v);
    for (std::uint64_t i = 0; i < delta.size(); ++i) {
        for (std::uint64_t c = 0; c < sh.d_v; ++c)
            o[c] = stored ? forward.o[i * sh.d_v + c] : bits_of(forward.o_f32[i * sh.d_v + c]);
        delta[i] = recipe_delta_row(ctx.recipe, in.d_o.data() + i * sh.d_v, o.data(),
                                    stored ? *ctx.recipe.output.format : f32, static_cast<int>(sh.d_v));
    }
    return delta;
}

std::vector<std::uint32_t> block_fake_quantized(const std::vector<std::uint32_t>& x, const Format& held,
                                                std::vector<std::uint64_t> dims, int axis, const BlockFormat& format,
                                                int block, const Format& to, const char* what,
                                                const CastOptions& elements) {
    Tensor t = Tensor::zeros(what, dtype_of(held), std::move(dims));
    const int unit = info(t.dtype()).storage_bytes;  // the low bytes of each element's bits
    std::byte* bytes = t.mutable_bytes().data();
    for (std::size_t i = 0; i < x.size(); ++i) std::memcpy(bytes + i * unit, &x[i], static_cast<std::size_t>(unit));
    BlockSpec spec;
    spec.format = &format;
    spec.block = block;
    spec.axis = axis;
    spec.threads = 1;
    spec.element_options = elements;
    const Tensor dequantized = block_dequantize(block_quantize(t, spec), spec);
    std::vector<std::uint32_t> as_f32(x.size());
    std::memcpy(as_f32.data(), dequantized.bytes().data(), 4 * as_f32.size());  // float32: 4 bytes each
    return exact_in(as_f32, f32, to, what);
}

std::vector<std::uint32_t> quantized_v(const FlashContext& ctx, const std::vector<std::uint32_t>& v) {
    if (ctx.recipe.p_and_v.v_quant == nullptr) return {};
    const AttentionShape& s = ctx.shape;
    return block_fake_quantized(v, *ctx.recipe.target.input, {s.heads / s.kv_group, s.n_kv, s.d_v}, -2,
                                *ctx.recipe.p_and_v.v_quant, ctx.recipe.p_and_v.v_block, *ctx.recipe.target.input,
                                "quantized v");
}

AttentionOperands quantized_qk(const FlashContext& ctx, const AttentionOperands& in) {
    AttentionOperands out = in;
    if (ctx.recipe.scores.qk_quant == nullptr) return out;
    const AttentionShape& s = ctx.shape;
    const Format& input = *ctx.recipe.target.input;
    out.q = block_fake_quantized(in.q, input, {s.heads, s.n_q, s.d}, -1, *ctx.recipe.scores.qk_quant, 32, input,
                                 "quantized q");
    out.k = block_fake_quantized(in.k, input, {s.heads / s.kv_group, s.n_kv, s.d}, -1, *ctx.recipe.scores.qk_quant, 32,
                                 input, "quantized k");
    return out;
}

}  // namespace roundscope::emu
