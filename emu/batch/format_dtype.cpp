#include "emu/batch/format_dtype.hpp"

#include <string>

#include "lib/error.hpp"

namespace roundscope::emu {

DType dtype_of(const Format& f) {
    if (const auto t = find_dtype(f.name)) return *t;
    throw Error("format " + std::string(f.name) + " has no dtype");
}

const Format& format_of(DType t) {
    if (is_floating(t))
        if (const Format* f = find_format(name(t))) return *f;
    throw Error("dtype " + std::string(name(t)) + " is not a floating-point format");
}

}  // namespace roundscope::emu
