#pragma once
// An argument of a library call that the library refuses. The library names the argument in its
// own spelling (k_sink, softmax_scale); each front end says it its own way: the command line as
// the flag that carried it (--k-sink), Python as the keyword argument (k_sink), which is what
// what() says.
#include <string>
#include <utility>

#include "lib/error.hpp"

namespace roundscope::api {

class ArgumentError : public Error {
public:
    ArgumentError(std::string argument, std::string detail)
        : Error(argument + ": " + detail), argument_(std::move(argument)), detail_(std::move(detail)) {}
    const std::string& argument() const noexcept { return argument_; }
    const std::string& detail() const noexcept { return detail_; }

private:
    std::string argument_, detail_;
};

/// f(), with an Error it throws about `argument`'s value (a name it does not know, a format it
/// cannot read) made an ArgumentError naming it. FileErrors and ArgumentErrors pass as they are.
template <class F>
decltype(auto) for_argument(const char* argument, F&& f) {
    try {
        return f();
    } catch (const FileError&) {
        throw;
    } catch (const ArgumentError&) {
        throw;
    } catch (const Error& e) {
        throw ArgumentError(argument, e.what());
    }
}

}  // namespace roundscope::api
