#pragma once
// The one bridge between the number formats (emu/numbers/format.hpp) and the dtypes tensors are
// stored in (lib/dtype.hpp): a floating dtype and its format share a name, and these two
// functions are the only place that relies on it.
#include "emu/numbers/format.hpp"
#include "lib/dtype.hpp"

namespace roundscope::emu {

/// The dtype that stores `f`.
DType dtype_of(const Format& f);

/// The format of a floating dtype; an Error for bool and integer dtypes.
const Format& format_of(DType t);

}  // namespace roundscope::emu
