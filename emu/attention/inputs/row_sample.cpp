#include "emu/attention/inputs/row_sample.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "lib/error.hpp"

namespace roundscope::emu {
namespace {

// A draw uniform on [0, n): rejection of the top partial range of 64-bit words, so no
// implementation-defined distribution enters.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n + 1) % n;  // a multiple of n, minus 1
    std::uint64_t x = rng();
    while (x > limit) x = rng();
    return x % n;
}

// Rows `rows` of t, whose rows are `width` elements each: a copy.
Tensor rows_of(const Tensor& t, const std::vector<std::uint64_t>& rows, std::uint64_t width, Shape shape) {
    const auto unit = static_cast<std::uint64_t>(info(t.dtype()).storage_bytes);
    std::vector<std::byte> bytes(rows.size() * width * unit);
    const std::span<const std::byte> from = t.bytes();
    for (std::size_t r = 0; r < rows.size(); ++r)
        std::memcpy(bytes.data() + r * width * unit, from.data() + rows[r] * width * unit, width * unit);
    return Tensor(t.name(), t.dtype(), std::move(shape), std::move(bytes));
}

}  // namespace

std::vector<std::uint64_t> sample_rows(std::uint64_t n, std::uint64_t k, std::uint64_t seed,
                                       std::vector<std::uint64_t>* order) {
    k = std::min(k, n);
    std::vector<std::uint64_t> all(n);
    std::iota(all.begin(), all.end(), std::uint64_t{0});
    std::mt19937_64 rng(seed);
    for (std::uint64_t i = 0; i < k; ++i) std::swap(all[i], all[i + uniform_below(rng, n - i)]);
    all.resize(k);
    if (order != nullptr) *order = all;
    std::sort(all.begin(), all.end());
    return all;
}

RowSample sample_row_groups(std::uint64_t n, std::uint64_t k, std::uint64_t seed, std::size_t groups) {
    std::vector<std::uint64_t> order;
    RowSample s;
    s.rows = std::make_shared<const std::vector<std::uint64_t>>(sample_rows(n, k, seed, &order));
    if (groups < 1 || groups > order.size())
        throw Error(fmt::format("a sample of {} rows cannot be split into {} groups", order.size(), groups));
    for (std::size_t g = 0; g < groups; ++g) {
        std::vector<std::uint64_t> part;
        for (std::size_t i = g; i < order.size(); i += groups) part.push_back(order[i]);
        std::sort(part.begin(), part.end());
        s.groups.push_back(std::make_shared<const std::vector<std::uint64_t>>(std::move(part)));
    }
    return s;
}

AttentionInputs sampled_rows(const AttentionInputs& head, std::shared_ptr<const std::vector<std::uint64_t>> rows) {
    if (head.batch * head.heads != 1) throw Error("sampled_rows: one head's inputs only");
    if (head.query_rows) throw Error("sampled_rows: these inputs are already a sample of rows");
    if (!rows || rows->empty()) throw Error("sampled_rows: no rows");
    for (std::size_t r = 0; r < rows->size(); ++r)
        if ((*rows)[r] >= head.n_q || (r > 0 && (*rows)[r] <= (*rows)[r - 1]))
            throw Error(fmt::format("sampled_rows: row {} ({}) is out of order or past the {} query rows", r,
                                    (*rows)[r], head.n_q));
    const std::uint64_t k = rows->size();
    AttentionInputs s = head;
    s.q = rows_of(head.q, *rows, head.d, {k, head.d});
    if (head.o) s.o = rows_of(*head.o, *rows, head.d_v, {k, head.d_v});
    if (head.d_o) s.d_o = rows_of(*head.d_o, *rows, head.d_v, {k, head.d_v});
    if (head.lse) s.lse = rows_of(*head.lse, *rows, 1, {k});
    s.x.reset(), s.w_q.reset(), s.d_model = 0;
    s.n_q = k;
    s.query_rows_of = head.n_q;
    s.query_rows = std::move(rows);
    return s;
}

}  // namespace roundscope::emu
