#pragma once
// Errors in a Python argument's value: the layers below name the value ("unknown rounding mode
// 'nearest' ..."), the package the argument that carried it ("rounding: ...").
#include <string>

#include "lib/error.hpp"

namespace roundscope::python {

/// f(), an Error it throws named after the Python argument whose value it is.
template <class F>
decltype(auto) naming_argument(const char* argument, F&& f) {
    try {
        return f();
    } catch (const FileError&) {
        throw;
    } catch (const Error& e) {
        throw Error(std::string(argument) + ": " + e.what());
    }
}

}  // namespace roundscope::python
