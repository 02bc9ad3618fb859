#pragma once
// The keyword arguments of a library call from Python, read into a typed request: each value
// converted to the type its field has, or refused naming the argument (a bool where a number
// goes: TypeError; an integer that does not fit: ValueError), and a keyword the call does not
// take refused rather than ignored. Ranges are the library's to check (api/argument_checks.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nlohmann/json.hpp>

namespace roundscope::python {

namespace nb = nanobind;

class Keywords {
public:
    explicit Keywords(nb::kwargs kwargs) : kwargs_(std::move(kwargs)) {}

    /// The value of `name` where it is given and not None.
    std::optional<std::int64_t> integer(const char* name);
    std::optional<std::uint64_t> seed(const char* name);  // 0 to 2^64 - 1
    std::optional<double> number(const char* name);
    std::optional<bool> flag(const char* name);  // a bool (an int is refused: flags are not counts)
    std::optional<std::string> text(const char* name);
    std::optional<std::vector<double>> numbers(const char* name);     // a number or a sequence of them
    std::optional<std::vector<std::string>> texts(const char* name);  // a sequence of strings (not one string)
    /// A recipe's settings: a mapping of keys to values, as KEY=VALUE (a bool as true or false).
    std::optional<std::vector<std::string>> settings(const char* name);
    /// Any object (a callable the call hands on), None where not given.
    nb::object object(const char* name) { return take(name); }
    /// The arguments `name` refers to; whether it is given.
    bool has(const char* name) const;

    /// TypeError for every keyword read by none of the calls above.
    void finish() const;

private:
    nb::object take(const char* name);
    nb::kwargs kwargs_;
    std::vector<std::string> read_;
};

/// A JSON value as Python objects (dict, list, str, int, float, bool, None).
nb::object to_python(const nlohmann::json& j);

}  // namespace roundscope::python
