// A sample of query rows (emu/attention/inputs/row_sample.hpp) run as its own problem, each row at its
// position: the rows get the bits the whole problem gives them, for every preset the emulator
// runs, causal or not, with and without shared S; a wrong position is seen (negative control).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <memory>
#include <set>
#include <tuple>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "lib/error.hpp"
#include "tests/emu/attention/recipe_test_helpers.hpp"

using namespace roundscope;
using namespace roundscope::emu;

namespace {

// The rows `rows` of a [n][width] array.
template <class T>
std::vector<T> rows_of(const std::vector<T>& x, const std::vector<std::uint64_t>& rows, std::uint64_t width) {
    std::vector<T> out;
    for (const std::uint64_t r : rows) out.insert(out.end(), x.begin() + r * width, x.begin() + (r + 1) * width);
    return out;
}

using test::same_bits;

struct Sampled {
    AttentionShape shape;
    AttentionOperands operands;
};

Sampled sampled(const AttentionShape& sh, const AttentionOperands& in, const std::vector<std::uint64_t>& rows) {
    Sampled s{sh, in};
    s.shape.n_q = rows.size();
    s.shape.query_rows = std::make_shared<const std::vector<std::uint64_t>>(rows);
    s.shape.query_rows_of = sh.n_q;
    s.operands.q = rows_of(in.q, rows, sh.d);
    s.operands.d_o.clear();
    return s;
}

}  // namespace

TEST_CASE("sample_rows draws distinct rows, ascending, the same for a seed, every row once k reaches n",
          "[row_sample]") {
    const std::vector<std::uint64_t> a = sample_rows(1000, 100, 7), b = sample_rows(1000, 100, 7);
    CHECK(a == b);
    CHECK(a.size() == 100);
    CHECK(std::is_sorted(a.begin(), a.end()));
    CHECK(std::set<std::uint64_t>(a.begin(), a.end()).size() == 100);
    CHECK(a.back() < 1000);
    CHECK(sample_rows(1000, 100, 8) != a);
    std::vector<std::uint64_t> all(50);
    for (std::uint64_t i = 0; i < 50; ++i) all[i] = i;
    CHECK(sample_rows(50, 50, 3) == all);
    CHECK(sample_rows(50, 80, 3) == all);
    // Uniform: over many seeds each of 10 rows is drawn about k/n of the time.
    std::vector<int> hits(10, 0);
    for (std::uint64_t seed = 0; seed < 4000; ++seed)
        for (const std::uint64_t r : sample_rows(10, 3, seed)) ++hits[r];
    for (const int h : hits) CHECK(std::abs(h - 1200) < 150);  // 1200 expected, sd about 29
}

TEST_CASE("A sample of query rows gives each row the whole problem's bits, for every preset, causal or not",
          "[row_sample][flash]") {
    const std::vector<std::uint64_t> rows = sample_rows(150, 37, 5);
    std::vector<std::uint64_t> edges = rows;  // the first and last rows too
    edges.front() = 0, edges.back() = 149;
    for (const AttentionRecipe& r : recipe_presets()) {
        for (const bool causal : {false, true}) {
            DYNAMIC_SECTION(r.name << (causal ? " causal" : "")) {
                const AttentionShape sh = attention_shape(1, 150, 170, 32, causal);
                const AttentionOperands in = random_operands(sh, *r.target.input, 11, 2.0);
                ForwardResult whole;
                try {
                    whole = flash_forward(r, sh, in, 2);
                } catch (const std::exception&) {
                    continue;  // a preset this shape cannot run (its own test says why)
                }
                for (const std::vector<std::uint64_t>* list :
                     std::initializer_list<const std::vector<std::uint64_t>*>{&rows, &edges}) {
                    const Sampled s = sampled(sh, in, *list);
                    RunCache cache;
                    ForwardOptions shared;
                    shared.runs = &cache;
                    for (const ForwardResult& f :
                         {flash_forward(r, s.shape, s.operands, 2), flash_forward(r, s.shape, s.operands, shared)}) {
                        CHECK(same_bits(f.o, rows_of(whole.o, *list, sh.d_v)));
                        CHECK(same_bits(f.o_f32, rows_of(whole.o_f32, *list, sh.d_v)));
                        CHECK(same_bits(f.lse, rows_of(whole.lse, *list, 1)));
                    }
                }
                if (causal) {  // negative control: every row one position later sees one key more
                    std::vector<std::uint64_t> later = rows;
                    for (std::uint64_t& x : later) ++x;
                    Sampled s = sampled(sh, in, rows);
                    s.shape.query_rows = std::make_shared<const std::vector<std::uint64_t>>(later);
                    CHECK_FALSE(same_bits(flash_forward(r, s.shape, s.operands, 2).lse, rows_of(whole.lse, rows, 1)));
                }
            }
        }
    }
}

TEST_CASE("A sample has no backward pass, and sampled_rows refuses rows out of order or range", "[row_sample]") {
    const AttentionShape sh = attention_shape(1, 64, 64, 16, true);
    AttentionOperands in = random_operands(sh, bf16, 3, 1.0);
    const AttentionRecipe& r = find_recipe("fa2-bf16");
    const Sampled s = sampled(sh, in, {1, 5, 9});
    const ForwardResult f = flash_forward(r, s.shape, s.operands, 1);
    AttentionOperands with_do = s.operands;
    with_do.d_o.assign(3 * sh.d_v, 0);
    CHECK_THROWS_WITH(flash_backward(r, s.shape, with_do, f), Catch::Contains("dK and dV need every row"));

    AttentionInputs head;
    head.q = Tensor::zeros("q", DType::f32, {8, 4}), head.k = Tensor::zeros("k", DType::f32, {8, 4});
    head.v = Tensor::zeros("v", DType::f32, {8, 4});
    head.n_q = head.n_kv = 8, head.d = head.d_v = 4;
    auto list = [](std::vector<std::uint64_t> x) { return std::make_shared<const std::vector<std::uint64_t>>(x); };
    CHECK_THROWS_WITH(sampled_rows(head, list({3, 2})), Catch::Contains("out of order"));
    CHECK_THROWS_WITH(sampled_rows(head, list({3, 8})), Catch::Contains("past the 8 query rows"));
    CHECK_THROWS_AS(sampled_rows(head, list({})), Error);
    const AttentionInputs two = sampled_rows(head, list({2, 6}));
    CHECK(two.n_q == 2);
    CHECK(two.q.shape() == Shape{2, 4});
    CHECK(two.query_rows_of == 8);
    CHECK_THROWS_WITH(sampled_rows(two, list({0})), Catch::Contains("already a sample"));
}

namespace {

bool same_counts(const ForwardCounts& a, const ForwardCounts& b) {
    return std::tie(a.p_bar_one, a.p_nonzero, a.p_underflow, a.p_saturated, a.repeated_max_rows, a.tied_rows,
                    a.tie_dominated_rows, a.one_key_rows) == std::tie(b.p_bar_one, b.p_nonzero, b.p_underflow,
                                                                      b.p_saturated, b.repeated_max_rows, b.tied_rows,
                                                                      b.tie_dominated_rows, b.one_key_rows) &&
           std::bit_cast<std::uint64_t>(a.tie_share_sum) == std::bit_cast<std::uint64_t>(b.tie_share_sum);
}

bool same_result(const ForwardResult& a, const ForwardResult& b) {
    bool rows = a.row_counts.size() == b.row_counts.size() && a.head_counts.size() == b.head_counts.size();
    for (std::size_t i = 0; rows && i < a.row_counts.size(); ++i) rows = same_counts(a.row_counts[i], b.row_counts[i]);
    for (std::size_t h = 0; rows && h < a.head_counts.size(); ++h)
        rows = same_counts(a.head_counts[h], b.head_counts[h]);
    return rows && same_bits(a.o, b.o) && same_bits(a.o_f32, b.o_f32) && same_bits(a.lse, b.lse) &&
           same_bits(a.lse_log2, b.lse_log2) && same_counts(a.counts, b.counts);
}

}  // namespace

TEST_CASE(
    "A group of a sample's rows is taken from the sample's kept run with its own run's bits and counts, for "
    "every preset",
    "[row_sample][flash][scores]") {
    const std::vector<std::uint64_t> rows = sample_rows(300, 200, 9);
    std::vector<std::uint64_t> group;  // 67 rows: more than one row block of most presets
    for (std::size_t i = 0; i < rows.size(); i += 3) group.push_back(rows[i]);
    for (const AttentionRecipe& r : recipe_presets()) {
        for (const bool causal : {false, true}) {
            DYNAMIC_SECTION(r.name << (causal ? " causal" : "")) {
                const AttentionShape sh = attention_shape(1, 300, 320, 32, causal);
                AttentionOperands in = random_operands(sh, *r.target.input, 17, 2.0);
                // keys 1 to 6 repeat key 0, so that rows tie at their maximum (the counts' double sum)
                for (std::uint64_t j = 1; j <= 6; ++j)
                    std::copy_n(in.k.begin(), sh.d, in.k.begin() + static_cast<std::ptrdiff_t>(j * sh.d));
                ForwardOptions plain, shared;
                plain.threads = shared.threads = 2;
                plain.uncounted_keys = shared.uncounted_keys = 1;
                ForwardResult whole;
                try {
                    whole = flash_forward(r, sh, in, plain);
                } catch (const std::exception&) {
                    continue;  // a preset this shape cannot run (its own test says why)
                }
                const Sampled s = sampled(sh, in, rows), g = sampled(sh, in, group);
                RunCache cache;
                shared.runs = &cache;
                const ForwardResult kept = flash_forward(r, s.shape, s.operands, shared);
                const ForwardResult own = flash_forward(r, g.shape, g.operands, plain);
                const ForwardResult taken = flash_forward(r, g.shape, g.operands, shared);
                const bool split = whole.row_counts.empty();  // a split-KV run keeps no row counts: computed
                CHECK(cache.forwards_sliced() == (split ? 0 : 1));
                CHECK(same_result(own, taken));
                if (!split) {
                    REQUIRE(kept.row_counts.size() == rows.size());
                    for (std::size_t i = 0; i < rows.size(); ++i)
                        CHECK(same_counts(kept.row_counts[i], whole.row_counts[rows[i]]));
                    if (r.name == "fa2-bf16") CHECK(whole.counts.tie_share_sum > 0);  // the double sum is tested
                }
                // another query at one of the positions, or a row the sample lacks: computed, not taken
                Sampled other = g;
                other.operands.q[3] ^= 1;
                CHECK(same_result(flash_forward(r, other.shape, other.operands, plain),
                                  flash_forward(r, other.shape, other.operands, shared)));
                std::vector<std::uint64_t> beyond = group;
                std::uint64_t missing = 0;
                while (std::binary_search(rows.begin(), rows.end(), missing)) ++missing;
                beyond.insert(std::lower_bound(beyond.begin(), beyond.end(), missing), missing);
                const Sampled b = sampled(sh, in, beyond);
                CHECK(same_result(flash_forward(r, b.shape, b.operands, plain),
                                  flash_forward(r, b.shape, b.operands, shared)));
                CHECK(cache.forwards_sliced() == (split ? 0 : 1));
            }
        }
    }
}
