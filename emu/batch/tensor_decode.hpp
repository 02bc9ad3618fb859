#pragma once
// Tensors (lib/tensor.hpp) decoded: elements as exact values, or to float or double through the
// batch decoder.
#include <cstdint>
#include <span>
#include <vector>

#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/format.hpp"
#include "emu/numbers/unpack.hpp"
#include "lib/tensor.hpp"

namespace roundscope::emu {

/// Element i as its exact value (integers and bool by value).
Unpacked unpack_element(const Tensor& t, std::uint64_t i);

/// Elements [first, first + out.size()) as Real: exact for every format into double; into
/// float, exact for formats of 16 bits or fewer, nearest-even otherwise. Integers convert
/// (64-bit ones above 2^53 round to nearest); bool gives 0 or 1. Single-threaded.
template <class Real>
void decode_elements(const Tensor& t, std::uint64_t first, std::span<Real> out);

/// The whole tensor, on `threads` threads (0 = all); the same bits on any thread count.
template <class Real>
std::vector<Real> decode_tensor(const Tensor& t, int threads = 0);

}  // namespace roundscope::emu
