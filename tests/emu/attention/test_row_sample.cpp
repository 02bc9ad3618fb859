// A sample of query rows (emu/attention/inputs/row_sample.hpp) run as its own problem, each row at its
// position: the rows get the bits the whole problem gives them, for every preset the emulator
// runs, causal or not, with and without shared S; a wrong position is seen (negative control).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <memory>
#include <set>

#include "emu/attention/flash/flash_attention.hpp"
#include "emu/attention/flash/random_operands.hpp"
#include "emu/attention/flash/run_cache.hpp"
#include "emu/attention/inputs/row_sample.hpp"
#include "lib/error.hpp"

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

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) {
               return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
           });
}

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
