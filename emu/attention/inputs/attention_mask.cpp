#include "emu/attention/inputs/attention_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

const char* alignment_name(Alignment a) { return a == Alignment::top_left ? "top-left" : "bottom-right"; }

Alignment parse_alignment(const std::string& name, const std::string& what) {
    if (name == "bottom-right" || name == "bottom_right") return Alignment::bottom_right;
    if (name == "top-left" || name == "top_left") return Alignment::top_left;
    throw Error(fmt::format("{} is '{}', not bottom-right or top-left", what, printable(name)));
}

DenseMask::DenseMask(Tensor t, std::uint64_t batch, std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv,
                     const std::string& file)
    : tensor_(std::move(t)), heads_per_batch_(heads) {
    const DType dt = tensor_.dtype();
    boolean_ = dt == DType::boolean;
    if (!boolean_ && !is_floating(dt))
        throw TensorError(file, tensor_.name(),
                          fmt::format("has dtype {}: a mask is boolean (true takes part) or floating (added to the "
                                      "scores)",
                                      name(dt)));
    const Shape& s = tensor_.shape();
    const std::array<std::uint64_t, 4> full{batch, heads, n_q, n_kv};
    if (s.size() < 1 || s.size() > 4)
        throw TensorError(file, tensor_.name(),
                          fmt::format("has shape {}; a mask broadcasts over [B, H, Nq, Nk] = {}", shape_string(s),
                                      shape_string(Shape(full.begin(), full.end()))));
    std::uint64_t stride = 1;
    for (std::size_t k = 0; k < 4; ++k) {
        const std::size_t axis = 3 - k;  // from the right
        const bool present = k < s.size();
        const std::uint64_t extent = present ? s[s.size() - 1 - k] : 1;
        if (extent != 1 && extent != full[axis])
            throw TensorError(file, tensor_.name(),
                              fmt::format("has shape {}, which does not broadcast over [B, H, Nq, Nk] = {}",
                                          shape_string(s), shape_string(Shape(full.begin(), full.end()))));
        strides_[axis] = extent == 1 ? 0 : stride;
        stride *= extent;
    }
}

double DenseMask::at(std::uint64_t head, std::uint64_t position, std::uint64_t key) const {
    const std::uint64_t b = head / heads_per_batch_, h = head % heads_per_batch_;
    const std::uint64_t i = first_ + b * strides_[0] + h * strides_[1] + position * strides_[2] + key * strides_[3];
    if (boolean_) return tensor_.bits_at(i) != 0 ? 0.0 : -std::numeric_limits<double>::infinity();
    return decode(format_of(tensor_.dtype()), tensor_.bits_at(i));
}

DenseMask DenseMask::heads(std::uint64_t first, std::uint64_t count) const {
    DenseMask m = *this;
    m.first_ = first_ + (first / heads_per_batch_) * strides_[0] + (first % heads_per_batch_) * strides_[1];
    if (first % heads_per_batch_ + count > heads_per_batch_)
        throw Error(fmt::format("heads {} to {} of a mask cross a batch entry", first, first + count - 1));
    m.heads_per_batch_ = count;
    return m;
}

void DenseMask::check_values(const std::string& file) const {
    if (boolean_) return;
    const Format& f = format_of(tensor_.dtype());
    for (std::uint64_t i = 0; i < tensor_.size(); ++i) {
        const double x = decode(f, tensor_.bits_at(i));
        if (std::isnan(x) || x == std::numeric_limits<double>::infinity())
            throw TensorError(file, tensor_.name(),
                              fmt::format("holds {} (element {}): an additive mask is finite or -inf (masked)",
                                          std::isnan(x) ? "NaN" : "+Inf", i));
    }
}

bool DenseMask::has_finite_nonzero() const {
    if (boolean_) return false;
    const Format& f = format_of(tensor_.dtype());
    for (std::uint64_t i = 0; i < tensor_.size(); ++i) {
        const double x = decode(f, tensor_.bits_at(i));
        if (x != 0 && std::isfinite(x)) return true;
    }
    return false;
}

bool DenseMask::operator==(const DenseMask& o) const {
    return tensor_.bytes().data() == o.tensor_.bytes().data() && tensor_.bytes().size() == o.tensor_.bytes().size() &&
           tensor_.dtype() == o.tensor_.dtype() && boolean_ == o.boolean_ && heads_per_batch_ == o.heads_per_batch_ &&
           strides_ == o.strides_ && first_ == o.first_;
}

KeyRange ScoreMask::band(std::uint64_t position, std::uint64_t n_q, std::uint64_t n_kv, bool causal) const {
    const auto nk = static_cast<std::int64_t>(n_kv);
    const std::int64_t p = static_cast<std::int64_t>(position) +
                           (alignment == Alignment::bottom_right ? nk - static_cast<std::int64_t>(n_q) : 0);
    std::int64_t begin = 0, end = nk;
    if (causal) end = std::min(end, p + 1);
    if (window_right >= 0) end = std::min(end, p + window_right + 1);
    if (window_left >= 0) begin = std::max(begin, p - window_left);
    end = std::max<std::int64_t>(end, 0);
    begin = std::min(begin, end);
    return {static_cast<std::uint64_t>(begin), static_cast<std::uint64_t>(end)};
}

double ScoreMask::dense_at(std::uint64_t head, std::uint64_t position, std::uint64_t key) const {
    double sum = 0;
    for (const DenseMask& m : dense) sum += m.at(head, position, key);  // two masks: 0 or -inf in one of them
    return sum;
}

double ScoreMask::at(std::uint64_t head, std::uint64_t position, std::uint64_t key, std::uint64_t n_q,
                     std::uint64_t n_kv, bool causal) const {
    const KeyRange r = band(position, n_q, n_kv, causal);
    if (key < r.begin || key >= r.end) return -std::numeric_limits<double>::infinity();
    return dense_at(head, position, key);
}

ScoreMask ScoreMask::heads(std::uint64_t first, std::uint64_t count) const {
    ScoreMask m = *this;
    for (DenseMask& d : m.dense) d = d.heads(first, count);
    return m;
}

std::string ScoreMask::describe(bool causal) const {
    std::string s = causal ? fmt::format("{} causal", alignment_name(alignment)) : "";
    if (has_window()) s += fmt::format("{}window ({}, {})", s.empty() ? "" : ", ", window_left, window_right);
    for (const DenseMask& d : dense)
        s += fmt::format("{}{} mask '{}'", s.empty() ? "" : ", ", d.boolean() ? "boolean" : "additive",
                         d.tensor().name());
    return s.empty() ? "none" : s;
}

}  // namespace roundscope::emu
