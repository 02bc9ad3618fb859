#pragma once
// The dict literal of an .npy header, parsed without evaluating anything: only string keys,
// strings, True/False and tuples of non-negative integers are accepted.
#include <string>
#include <string_view>

#include "lib/tensor.hpp"

namespace roundscope::detail {

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
};

/// Throws Error("<label>: ...") on anything else.
NpyHeader parse_npy_header(std::string_view text, const std::string& label);

}  // namespace roundscope::detail
