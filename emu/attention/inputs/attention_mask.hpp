#pragma once
// Which keys each query sees and what is added to its scores: every mask that PyTorch's
// scaled_dot_product_attention and FlashAttention take, in one description that the truth, the
// emulator and the analyses all read.
//
// A query row at position i (of Nq) has a diagonal key p = i + Nk - Nq (bottom-right alignment,
// FlashAttention 2.1+ and the kernels' causal mask) or p = i (top-left: PyTorch's
// scaled_dot_product_attention with is_causal, `torch.ones(L, S).tril()`). It sees key j when
//   causal:            j <= p
//   window (l, r):     p - l <= j <= p + r    (FlashAttention's window_size; -1: unbounded;
//                                              causal is the window (-1, 0))
//   every dense mask:  a boolean mask holds true there (PyTorch: true takes part), an additive
//                      mask is not -inf there (its value is added to the score)
// Dense masks broadcast over [B, H, Nq, Nk] as PyTorch broadcasts attn_mask: each dimension of
// the mask is that extent or 1, and a mask of fewer dimensions is aligned on the right.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/tensor.hpp"

namespace roundscope::emu {

/// Where the causal diagonal (and a window's centre) sits when Nq != Nk.
enum class Alignment { bottom_right, top_left };

/// "bottom-right" or "top-left".
const char* alignment_name(Alignment a);
/// The alignment named `name`; Error naming `what` (a metadata key, an option) for another.
Alignment parse_alignment(const std::string& name, const std::string& what);

/// A half-open range of keys [begin, end).
struct KeyRange {
    std::uint64_t begin = 0, end = 0;
};

/// A boolean or additive mask tensor broadcast over [B, H, Nq, Nk].
class DenseMask {
public:
    DenseMask() = default;
    /// `t` broadcast to [batch, heads, n_q, n_kv]: a TensorError naming the tensor of `file`
    /// (empty: none) when its shape does not broadcast or its dtype is neither bool nor floating.
    DenseMask(Tensor t, std::uint64_t batch, std::uint64_t heads, std::uint64_t n_q, std::uint64_t n_kv,
              const std::string& file);

    const Tensor& tensor() const { return tensor_; }
    bool boolean() const { return boolean_; }
    /// What is added to the score of (head, query position, key), heads flattened over the
    /// batch: 0 or -inf for a boolean mask, the value (exact) for an additive one.
    double at(std::uint64_t head, std::uint64_t position, std::uint64_t key) const;
    /// The mask of heads [first, first + count) alone (as head 0, 1, ...).
    DenseMask heads(std::uint64_t first, std::uint64_t count) const;
    /// Whether every element's row is the same for every query position (a padding mask over
    /// keys, [.., 1, Nk]).
    bool same_for_every_query() const { return strides_[2] == 0; }
    /// A TensorError naming the tensor (of `file`) for a NaN or +inf element of an additive mask.
    void check_values(const std::string& file) const;
    /// Whether an additive mask holds a value other than 0 and -inf (a boolean one never does).
    bool has_finite_nonzero() const;
    /// The same elements of the same tensor, broadcast alike.
    bool operator==(const DenseMask& o) const;

private:
    Tensor tensor_;
    bool boolean_ = false;
    std::uint64_t heads_per_batch_ = 1;
    std::array<std::uint64_t, 4> strides_{};  // elements over [B, H, Nq, Nk]; 0 where broadcast
    std::uint64_t first_ = 0;                 // element of (head 0, position 0, key 0)
};

/// Everything but the causal flag (which commands may set): the alignment, the window and the
/// dense masks (attn_mask, bias), each added to the scores. Empty: nothing but causality.
struct ScoreMask {
    Alignment alignment = Alignment::bottom_right;
    std::int64_t window_left = -1, window_right = -1;  // -1: unbounded
    std::vector<DenseMask> dense;

    bool has_window() const { return window_left >= 0 || window_right >= 0; }
    /// Nothing beyond a bottom-right causal mask: every row sees a prefix of the keys.
    bool prefix_only() const { return alignment == Alignment::bottom_right && !has_window() && dense.empty(); }
    /// The keys the causal mask and the window leave to the row at `position` (of n_q).
    KeyRange band(std::uint64_t position, std::uint64_t n_q, std::uint64_t n_kv, bool causal) const;
    /// What the dense masks add to the score of (head, position, key): 0, a finite value, or -inf.
    double dense_at(std::uint64_t head, std::uint64_t position, std::uint64_t key) const;
    /// The whole mask for (head, position, key): -inf outside the band, else dense_at.
    double at(std::uint64_t head, std::uint64_t position, std::uint64_t key, std::uint64_t n_q, std::uint64_t n_kv,
              bool causal) const;
    /// The mask of heads [first, first + count) alone.
    ScoreMask heads(std::uint64_t first, std::uint64_t count) const;
    /// "top-left causal, window (128, 0), boolean mask 'attn_mask'": what it holds, for messages.
    std::string describe(bool causal) const;
    bool operator==(const ScoreMask& o) const = default;
};

}  // namespace roundscope::emu
