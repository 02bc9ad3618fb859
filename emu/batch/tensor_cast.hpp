#pragma once
// Casting whole tensors: every element of any dtype rounded once into a format, optionally
// multiplied by a scale first (scaled_value.hpp). Element i uses random stream i, so the bits
// do not depend on the thread count.
#include <span>

#include "emu/batch/format_dtype.hpp"
#include "emu/numbers/cast_options.hpp"
#include "emu/numbers/format.hpp"
#include "lib/tensor.hpp"

namespace roundscope::emu {

/// t cast into `to` (same name and shape). Integers and bool are read as their values.
Tensor cast_tensor(const Tensor& t, const Format& to, const CastOptions& options, double scale = 1.0, int threads = 0);

/// The same into `out`, which holds exactly t.size() elements of `to`'s dtype (an Error otherwise).
void cast_tensor_into(const Tensor& t, const Format& to, const CastOptions& options, std::span<std::byte> out,
                      double scale = 1.0, int threads = 0);

}  // namespace roundscope::emu
