#pragma once
// A tensor file a request reads: a path, or tensors the caller holds, named in messages as the
// caller knows it.
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "lib/error.hpp"
#include "lib/tensor.hpp"

namespace roundscope::api {

struct FileSource {
    std::string name;                    // how messages name the file: its path, or the caller's argument
    std::function<TensorFile()> read;    // the file; empty for none
    bool tensors_are_arguments = false;  // the caller handed each tensor over as an argument of its own
                                         // (Python's arrays): an error about one names the tensor alone

    bool has_file() const { return static_cast<bool>(read); }
};

/// Rethrows `error` (an Error about `source`'s file) named after it: prefixed by the file's name
/// (once: a message that names it already stays as it is), or, where the tensors are the
/// caller's own arguments, an error about one of them named after that tensor alone.
[[noreturn]] void rethrow_naming(const FileSource& source, std::exception_ptr error);

/// f(), with an Error it throws named after `source`'s file as rethrow_naming says.
template <class F>
auto naming_input(const FileSource& source, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const Error&) {
        rethrow_naming(source, std::current_exception());
    }
}

/// f(), with an Error it throws named after the file `name` as naming_input says.
template <class F>
auto naming_file(const std::string& name, F&& f) -> decltype(f()) {
    FileSource source;
    source.name = name;
    return naming_input(source, std::forward<F>(f));
}

}  // namespace roundscope::api
