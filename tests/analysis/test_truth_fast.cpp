// The fast ground truth equals the reference bit for bit, and decides on its own (no head
// handed to the reference) on random and adversarial inputs: scores spread over hundreds (one
// key dominating by 100+), many equal maxima, values in the subnormal range of bf16, causal
// masks with Nq != Nk; and the double-double exp's ball holds MPFR's e^x.
#include <catch2/catch.hpp>

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "analysis/synthetic_attention.hpp"
#include "analysis/truth/attention_truth.hpp"
#include "analysis/truth/double_double.hpp"
#include "analysis/truth_cache.hpp"
#include "emu/attention/inputs/head_inputs.hpp"
#include "emu/numbers/round.hpp"

using namespace roundscope;
using namespace roundscope::analysis;

namespace {

Tensor bf16_tensor(const std::string& name, Shape shape, const std::vector<double>& values) {
    Tensor t = Tensor::zeros(name, DType::bf16, std::move(shape));
    for (std::size_t i = 0; i < values.size(); ++i)
        t.set_bits_at(i, emu::cast_from_f64(values[i], emu::bf16, emu::CastOptions{}));
    return t;
}

struct Case {
    std::uint64_t heads, n_q, n_kv, d, d_v;
    double spread;         // standard deviation of q and k
    bool equal_keys;       // every key equal to the first: all scores of a row tie
    double magnitude = 1;  // scale of q (2^-130: subnormal bf16 values)
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i])) return false;
    }
    return true;
}

// Every output both results hold, bit for bit (an empty tensor equals an empty one).
void check_same_bits(const AttentionTruth& fast, const AttentionTruth& reference) {
    CHECK(same_bits(fast.o, reference.o));
    CHECK(same_bits(fast.lse, reference.lse));
    CHECK(same_bits(fast.s, reference.s));
    CHECK(same_bits(fast.p, reference.p));
    CHECK(same_bits(fast.delta, reference.delta));
    CHECK(same_bits(fast.dq, reference.dq));
    CHECK(same_bits(fast.dk, reference.dk));
    CHECK(same_bits(fast.dv, reference.dv));
}

emu::AttentionInputs make(const Case& c, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    auto draw = [&](std::uint64_t n, double sd) {
        std::vector<double> x(n);
        for (auto& v : x) v = sd * g(rng);
        return x;
    };
    emu::AttentionInputs in;
    in.heads = c.heads;
    in.n_q = c.n_q, in.n_kv = c.n_kv, in.d = c.d, in.d_v = c.d_v;
    in.q = bf16_tensor("q", {c.heads, c.n_q, c.d}, draw(c.heads * c.n_q * c.d, c.spread * c.magnitude));
    std::vector<double> k = draw(c.heads * c.n_kv * c.d, c.spread);
    if (c.equal_keys) {
        for (std::size_t i = 0; i < k.size(); ++i) k[i] = k[i % c.d];
    }
    in.k = bf16_tensor("k", {c.heads, c.n_kv, c.d}, k);
    in.v = bf16_tensor("v", {c.heads, c.n_kv, c.d_v}, draw(c.heads * c.n_kv * c.d_v, 1));
    in.d_o = bf16_tensor("do", {c.heads, c.n_q, c.d_v}, draw(c.heads * c.n_q * c.d_v, 1));
    return in;
}

}  // namespace

TEST_CASE("Fast truth equals the reference bit for bit and decides alone", "[truth][fast]") {
    const Case c = GENERATE(Case{2, 37, 37, 16, 16, 1, false}, Case{1, 64, 64, 64, 64, 1, false},
                            Case{1, 48, 80, 128, 32, 1, false}, Case{1, 64, 64, 16, 16, 8, false},
                            Case{1, 32, 32, 64, 64, 1, true}, Case{1, 40, 40, 16, 16, 1, false, 0x1p-130},
                            Case{1, 1, 5, 16, 8, 1, false}, Case{1, 128, 128, 128, 128, 1, false},
                            Case{1, 256, 256, 64, 64, 1, false});
    const bool causal = GENERATE(false, true);
    const emu::AttentionInputs in = make(c, 17 + c.n_q + c.d);
    TruthOptions o;
    o.causal = causal;
    o.intermediates = c.n_q <= 64;
    const AttentionTruth fast = attention_truth(in, o), reference = attention_truth_reference(in, o);
    INFO("heads " << c.heads << " n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d << " spread " << c.spread
                  << " equal keys " << c.equal_keys << " causal " << causal);
    CHECK(fast.fast_heads == c.heads);
    check_same_bits(fast, reference);
}

TEST_CASE("Fast truth backward equals the reference bit for bit", "[truth][fast]") {
    const Case c = GENERATE(Case{2, 29, 29, 16, 16, 1, false}, Case{1, 48, 80, 64, 32, 1, false},
                            Case{1, 48, 48, 16, 16, 8, false}, Case{1, 32, 32, 16, 16, 1, true},
                            Case{1, 1, 5, 16, 8, 1, false}, Case{1, 96, 96, 128, 128, 1, false});
    const bool causal = GENERATE(false, true);
    const emu::AttentionInputs in = make(c, 5 + c.n_q + c.d);
    TruthOptions o;
    o.causal = causal;
    o.backward = true;
    const AttentionTruth fast = attention_truth(in, o), reference = attention_truth_reference(in, o);
    INFO("heads " << c.heads << " n_q " << c.n_q << " n_kv " << c.n_kv << " d " << c.d << " spread " << c.spread
                  << " equal keys " << c.equal_keys << " causal " << causal << " reference rows "
                  << fast.reference_rows);
    // With scores 100s apart some keys get only P below e^-600, whose bound alone enters the
    // fast sums: the reference's by design. All keys equal make dQ exactly 0, which the fast
    // path proves (a row's dS sums to zero).
    if (c.spread <= 1) CHECK(fast.fast_heads == c.heads);
    check_same_bits(fast, reference);
}

TEST_CASE("Fast truth backward proves dQ = 0 where a causal row's keys share a feature's value", "[truth][fast]") {
    // Real BF16 dumps: the first rows see two or three keys, and a feature equal in all of them
    // (BF16 has 8 significant bits) makes that row's dQ there exactly zero.
    Case c{2, 64, 64, 16, 16, 1, false};
    emu::AttentionInputs in = make(c, 41);
    for (std::uint64_t h = 0; h < c.heads; ++h)
        for (std::uint64_t j = 1; j < 1 + 3 * (h + 1); ++j)  // keys 1.. of head h
            for (std::uint64_t f = 0; f < c.d; f += 1 + h)   // share key 0's value in these features
                in.k.set_bits_at((h * c.n_kv + j) * c.d + f, in.k.bits_at(h * c.n_kv * c.d + f));
    TruthOptions o;
    o.causal = GENERATE(true, false);
    o.backward = true;
    const AttentionTruth fast = attention_truth(in, o), reference = attention_truth_reference(in, o);
    INFO("causal " << o.causal);
    CHECK(fast.fast_heads == c.heads);
    check_same_bits(fast, reference);
    std::size_t zeros = 0;
    for (const double x : fast.dq) zeros += x == 0;
    if (o.causal) CHECK(zeros > 2 * c.d);  // row 0 of each head, and the shared features of rows 1..
}

TEST_CASE("Fast truth backward proves the zero gradients of rows the loss does not reach", "[truth][fast]") {
    // A language model's dumps: the last position has no next token, so its dO is exactly zero,
    // and under the causal mask the last key is seen by that row alone: its dV and dK are sums of
    // exact zeros. Rows padded out of a batch have zero dO too. None may send the head to the
    // reference (it needed 2048 bits and minutes a head at N = 1024).
    Case c{2, 64, 64, 16, 16, 1, false};
    emu::AttentionInputs in = make(c, 43);
    for (std::uint64_t h = 0; h < c.heads; ++h)
        for (std::uint64_t i : {c.n_q - 1, c.n_q - 2 - 5 * h, std::uint64_t{3}})  // rows without a gradient
            for (std::uint64_t f = 0; f < c.d_v; ++f) in.d_o->set_bits_at((h * c.n_q + i) * c.d_v + f, 0);
    TruthOptions o;
    o.causal = GENERATE(true, false);
    o.backward = true;
    const AttentionTruth fast = attention_truth(in, o), reference = attention_truth_reference(in, o);
    INFO("causal " << o.causal);
    CHECK(fast.fast_heads == c.heads);
    CHECK(fast.reference_rows == 0);
    check_same_bits(fast, reference);
    if (o.causal)  // the last key's dV and dK: exactly zero
        for (std::uint64_t h = 0; h < c.heads; ++h)
            for (std::uint64_t f = 0; f < c.d; ++f) {
                CHECK(fast.dv[(h * c.n_kv + c.n_kv - 1) * c.d_v + f] == 0);
                CHECK(fast.dk[(h * c.n_kv + c.n_kv - 1) * c.d + f] == 0);
            }
}

namespace {

// An additive bias for `in`: ALiBi-like slopes times the distance (scores shifted by up to
// `reach`), with -inf on a fraction of the keys and on every key of query 1 (a row with no key
// left), one per head or one [Nq, Nk] for all.
void add_bias(emu::AttentionInputs& in, double reach, double masked_fraction, bool per_head, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform;
    const std::uint64_t heads = per_head ? in.heads : 1;
    std::vector<double> b(heads * in.n_q * in.n_kv);
    for (std::uint64_t h = 0; h < heads; ++h) {
        for (std::uint64_t i = 0; i < in.n_q; ++i) {
            for (std::uint64_t j = 0; j < in.n_kv; ++j) {
                const double distance = std::fabs(static_cast<double>(i) - static_cast<double>(j));
                const bool masked = uniform(rng) < masked_fraction || (i == 1 && in.n_q > 2);
                b[(h * in.n_q + i) * in.n_kv + j] =
                    masked ? -std::numeric_limits<double>::infinity()
                           : -reach * distance / static_cast<double>(in.n_kv) * (1.0 + static_cast<double>(h));
            }
        }
    }
    Tensor t = Tensor::zeros("bias", DType::f32, per_head ? Shape{in.heads, in.n_q, in.n_kv} : Shape{in.n_q, in.n_kv});
    for (std::size_t i = 0; i < b.size(); ++i) t.set_bits_at(i, emu::cast_from_f64(b[i], emu::f32, emu::CastOptions{}));
    in.mask.dense.assign(1, emu::DenseMask(t, in.batch, in.heads, in.n_q, in.n_kv, "tensor 'bias'"));
}

}  // namespace

TEST_CASE("Fast truth with an additive bias and -inf masks equals the reference bit for bit", "[truth][fast]") {
    const Case c =
        GENERATE(Case{2, 37, 37, 16, 16, 1, false}, Case{1, 48, 80, 64, 32, 1, false}, Case{2, 1, 5, 16, 8, 1, false});
    const bool causal = GENERATE(false, true);
    const bool per_head = GENERATE(false, true);
    const double reach = GENERATE(3.0, 700.0);  // 700: keys hundreds below the row's best
    emu::AttentionInputs in = make(c, 23 + c.n_q + c.d);
    add_bias(in, reach, 0.2, per_head, c.n_kv + (per_head ? 1 : 0));
    TruthOptions o;
    o.causal = causal;
    o.backward = true;
    o.intermediates = true;
    const AttentionTruth fast = attention_truth(in, o), reference = attention_truth_reference(in, o);
    INFO("heads " << c.heads << " n_q " << c.n_q << " n_kv " << c.n_kv << " causal " << causal << " per head "
                  << per_head << " reach " << reach << " reference rows " << fast.reference_rows);
    if (reach < 100) CHECK(fast.fast_heads == c.heads);
    check_same_bits(fast, reference);
    if (c.n_q > 2) {  // query 1 sees no key
        CHECK(fast.lse[1] == -std::numeric_limits<double>::infinity());
        CHECK(fast.o[c.d_v] == 0);
    }
}

TEST_CASE("The double-double exp's ball holds e^x", "[truth][fast]") {
    std::mt19937_64 rng(3);
    mpfr_t exact, lo, hi;
    mpfr_inits2(300, exact, lo, hi, static_cast<mpfr_ptr>(nullptr));
    for (int trial = 0; trial < 20000; ++trial) {
        const double x = std::uniform_real_distribution<double>(-600, 50)(rng);
        const double tail = x * std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), -60);
        const dd::Ball in{dd::fast_two_sum(x, tail), 0};
        const dd::Ball e = dd::exp(in);
        mpfr_set_d(exact, x, MPFR_RNDN);
        mpfr_add_d(exact, exact, tail, MPFR_RNDN);
        mpfr_exp(exact, exact, MPFR_RNDN);
        mpfr_set_d(lo, e.v.hi, MPFR_RNDN);
        mpfr_add_d(lo, lo, e.v.lo, MPFR_RNDN);
        mpfr_sub(lo, exact, lo, MPFR_RNDN);  // error of the midpoint
        mpfr_abs(lo, lo, MPFR_RNDN);
        const double error = mpfr_get_d(lo, MPFR_RNDU);
        REQUIRE(error <= e.r);
        // and the radius is tight enough to decide roundings: about 2^-90 relative
        REQUIRE(e.r <= std::fabs(e.v.hi) * 0x1p-85);
    }
    mpfr_clears(exact, lo, hi, static_cast<mpfr_ptr>(nullptr));
}

TEST_CASE("Fast truth backward takes an undecided row's gradient from the reference, the same bits", "[truth][fast]") {
    // Two tied keys holding all but e^-G of every row (the repeated-max scenario at a large gap)
    // leave dS the small difference of nearly equal terms: now and then a dQ ball straddles a
    // rounding boundary. That row alone goes to the reference, not the head.
    SyntheticSpec spec;
    spec.scenario = Scenario::repeated_max;
    spec.n = 128, spec.d = 64, spec.tie_gap = 20;
    TruthOptions o;
    o.backward = true;
    std::optional<emu::AttentionInputs> found;
    AttentionTruth fast;
    for (spec.seed = 0; spec.seed < 64 && !found; ++spec.seed) {
        const emu::AttentionInputs in = synthetic_attention(spec);
        fast = attention_truth(in, o);
        if (fast.reference_rows > 0) found = in;
    }
    REQUIRE(found.has_value());
    INFO("seed " << spec.seed - 1 << " reference rows " << fast.reference_rows);
    CHECK(fast.fast_heads == 1);
    CHECK(fast.reference_rows < spec.n);
    check_same_bits(fast, attention_truth_reference(*found, o));
}

namespace {

// `in` with k and v cut to every `group`-th head (the key-value heads a grouped-query model holds).
emu::AttentionInputs grouped(const emu::AttentionInputs& in, std::uint64_t group) {
    emu::AttentionInputs g = in;
    auto every = [&](const Tensor& t, std::uint64_t rows, std::uint64_t cols) {
        Tensor out = Tensor::zeros(t.name(), t.dtype(), {in.heads / group, rows, cols});
        for (std::uint64_t h = 0; h < in.heads / group; ++h)
            for (std::uint64_t x = 0; x < rows * cols; ++x)
                out.set_bits_at(h * rows * cols + x, t.bits_at(h * group * rows * cols + x));
        return out;
    };
    g.k = every(in.k, in.n_kv, in.d), g.v = every(in.v, in.n_kv, in.d_v);
    g.kv_heads = in.heads / group;
    return g;
}

}  // namespace

TEST_CASE(
    "Truth under grouped-query attention: each query head as if its key-value head were its own, dK and "
    "dV the group's exact sums - fast equals reference bit for bit",
    "[truth][fast][gqa]") {
    const std::uint64_t group = GENERATE(3, 6);
    const bool causal = GENERATE(false, true);
    emu::AttentionInputs full = make(Case{6, 20, 28, 16, 16, 1.5, false}, 77 + group);
    const emu::AttentionInputs gqa = grouped(full, group);
    // the same problem with the key-value heads repeated to every query head
    emu::AttentionInputs repeated = gqa;
    repeated.k = emu::kv_per_query_head(gqa).k, repeated.v = emu::kv_per_query_head(gqa).v;
    repeated.kv_heads = 0;
    TruthOptions o;
    o.causal = causal, o.backward = true, o.intermediates = true;
    const AttentionTruth fast = attention_truth(gqa, o), reference = attention_truth_reference(gqa, o);
    INFO("group " << group << " causal " << causal);
    check_same_bits(fast, reference);
    CHECK(fast.kv_heads == 6 / group);
    REQUIRE(fast.dk.size() == 6 / group * 28 * 16);
    const AttentionTruth each = attention_truth(repeated, o);
    CHECK(same_bits(fast.o, each.o));
    CHECK(same_bits(fast.lse, each.lse));
    CHECK(same_bits(fast.dq, each.dq));
    CHECK(same_bits(fast.delta, each.delta));
    // dK: the exact sum, rounded once, lies within half an ulp of the sum of the heads' exact
    // values, each of which lies within half an ulp of its rounded value: within (g + 1) / 2 ulps
    // of the rounded values' sum, and it is not that sum's rounding everywhere
    std::uint64_t differs = 0;
    for (std::uint64_t kv = 0; kv < 6 / group; ++kv) {
        for (std::uint64_t x = 0; x < 28 * 16; ++x) {
            double sum = 0, ulps = 0;
            for (std::uint64_t h = kv * group; h < (kv + 1) * group; ++h) {
                sum += each.dk[h * 28 * 16 + x];
                ulps += std::fabs(std::nextafter(each.dk[h * 28 * 16 + x], INFINITY) - each.dk[h * 28 * 16 + x]);
            }
            const double got = fast.dk[kv * 28 * 16 + x];
            CHECK(std::fabs(got - sum) <= ulps + std::fabs(std::nextafter(got, INFINITY) - got));
            differs += got != sum;
        }
    }
    CHECK(differs > 0);
}

TEST_CASE(
    "Truth of dQ without dK and dV: delta and dQ have the bits of the whole backward, fast and reference, "
    "and a group's query head is its own head's truth",
    "[truth][fast][gqa]") {
    const std::uint64_t group = GENERATE(1, 3);
    const bool causal = GENERATE(false, true);
    const emu::AttentionInputs gqa = grouped(make(Case{6, 20, 28, 16, 16, 1.5, false}, 31 + group), group);
    TruthOptions all, rows_only;
    all.causal = rows_only.causal = causal;
    all.backward = rows_only.backward = true;
    rows_only.key_gradients = false;
    const AttentionTruth whole = attention_truth(gqa, all);
    INFO("group " << group << " causal " << causal);
    for (const AttentionTruth& t : {attention_truth(gqa, rows_only), attention_truth_reference(gqa, rows_only)}) {
        CHECK(same_bits(t.o, whole.o));
        CHECK(same_bits(t.lse, whole.lse));
        CHECK(same_bits(t.delta, whole.delta));
        CHECK(same_bits(t.dq, whole.dq));
        CHECK((t.dk.empty() && t.dv.empty()));
    }
    // each query head's outputs, taken from the truth of its group, are that head's own truth
    for (std::uint64_t h = 0; h < 6; ++h) {
        const AttentionTruth taken = query_head_of(whole, h);
        const AttentionTruth own = attention_truth(emu::head_inputs(gqa, h), rows_only);
        CHECK((taken.heads == 1 && taken.n_q == 20));
        CHECK(same_bits(taken.o, own.o));
        CHECK(same_bits(taken.lse, own.lse));
        CHECK(same_bits(taken.delta, own.delta));
        CHECK(same_bits(taken.dq, own.dq));
        CHECK((taken.dk.empty() && taken.dv.empty()));
    }
}

TEST_CASE("Truth with every mask kind: a window and a top-left diagonal are their -inf bias, fast equals reference",
          "[truth][fast][mask]") {
    emu::AttentionInputs in = make(Case{2, 18, 30, 16, 16, 1.5, false}, 91);
    struct Kind {
        bool causal, top_left;
        std::int64_t left, right;
    };
    const Kind k =
        GENERATE(Kind{true, true, -1, -1}, Kind{false, false, 5, 2}, Kind{true, false, 7, -1}, Kind{true, true, 3, 0});
    emu::AttentionInputs banded = in;
    banded.mask.alignment = k.top_left ? emu::Alignment::top_left : emu::Alignment::bottom_right;
    banded.mask.window_left = k.left, banded.mask.window_right = k.right;
    // the same band written as an additive float64 bias of 0 and -inf, no causal flag
    emu::AttentionInputs biased = in;
    std::vector<double> b(in.n_q * in.n_kv);
    for (std::uint64_t i = 0; i < in.n_q; ++i) {
        const std::int64_t p = static_cast<std::int64_t>(i) + (k.top_left ? 0 : 30 - 18);
        for (std::uint64_t j = 0; j < in.n_kv; ++j) {
            const auto jj = static_cast<std::int64_t>(j);
            const bool seen =
                (!k.causal || jj <= p) && (k.right < 0 || jj <= p + k.right) && (k.left < 0 || jj >= p - k.left);
            b[i * in.n_kv + j] = seen ? 0.0 : -std::numeric_limits<double>::infinity();
        }
    }
    Tensor t = Tensor::of_bits("bias", DType::f64, {in.n_q, in.n_kv}, b);
    biased.mask.dense.emplace_back(t, 1, 2, in.n_q, in.n_kv, "tensor 'bias'");
    TruthOptions o;
    o.backward = true, o.intermediates = true;
    TruthOptions with_causal = o;
    with_causal.causal = k.causal;
    const AttentionTruth band = attention_truth(banded, with_causal), dense = attention_truth(biased, o);
    INFO("causal " << k.causal << " top-left " << k.top_left << " window " << k.left << ", " << k.right);
    CHECK(same_bits(band.o, dense.o));
    CHECK(same_bits(band.lse, dense.lse));
    CHECK(same_bits(band.dq, dense.dq));
    CHECK(same_bits(band.dk, dense.dk));
    CHECK(same_bits(band.dv, dense.dv));
    check_same_bits(band, attention_truth_reference(banded, with_causal));
}
