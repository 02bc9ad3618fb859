#include "python/module/keywords.hpp"

#include <algorithm>

#include <nanobind/stl/string.h>

#include "api/argument_checks.hpp"
#include "api/argument_error.hpp"

namespace roundscope::python {
namespace {

std::string repr_of(nb::handle x) { return nb::cast<std::string>(nb::repr(x)); }
std::string type_of(nb::handle x) { return nb::cast<std::string>(nb::type_name(x.type())); }

[[noreturn]] void type_error(const char* name, const std::string& detail) {
    throw nb::type_error((std::string(name) + ": " + detail).c_str());
}

bool is_bool(nb::handle x) { return PyBool_Check(x.ptr()); }
bool is_int(nb::handle x) { return PyLong_Check(x.ptr()) && !is_bool(x); }
bool is_float(nb::handle x) { return PyFloat_Check(x.ptr()); }

}  // namespace

nb::object Keywords::take(const char* name) {
    read_.emplace_back(name);
    if (!kwargs_.contains(name)) return nb::none();
    return kwargs_[name];
}

bool Keywords::has(const char* name) const { return kwargs_.contains(name) && !kwargs_[name].is_none(); }

std::optional<std::int64_t> Keywords::integer(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (is_bool(x)) type_error(name, "expected a number, not " + repr_of(x));
    if (is_float(x)) throw api::ArgumentError(name, "must be an integer, not '" + repr_of(x) + "'");
    if (!is_int(x)) type_error(name, "expected an integer, not " + type_of(x));
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(x.ptr(), &overflow);
    if (overflow != 0)
        throw api::ArgumentError(name, "must be an integer from -2^63 to 2^63 - 1, not '" + repr_of(x) + "'");
    return static_cast<std::int64_t>(v);
}

std::optional<std::uint64_t> Keywords::seed(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (is_bool(x)) type_error(name, "expected a number, not " + repr_of(x));
    if (!is_int(x)) {
        if (is_float(x)) throw api::ArgumentError(name, api::seed_out_of_range("'" + repr_of(x) + "'"));
        type_error(name, "expected an integer, not " + type_of(x));
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(x.ptr());
    if (PyErr_Occurred()) {
        PyErr_Clear();
        throw api::ArgumentError(name, api::seed_out_of_range("'" + repr_of(x) + "'"));
    }
    return static_cast<std::uint64_t>(v);
}

std::optional<double> Keywords::number(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (is_bool(x)) type_error(name, "expected a number, not " + repr_of(x));
    if (is_float(x)) return PyFloat_AsDouble(x.ptr());
    if (is_int(x)) {
        const double v = PyLong_AsDouble(x.ptr());
        if (PyErr_Occurred()) {
            PyErr_Clear();
            throw api::ArgumentError(name, "must be a finite number, not '" + repr_of(x) + "'");
        }
        return v;
    }
    type_error(name, "expected a number, not " + type_of(x));
}

std::optional<bool> Keywords::flag(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (!is_bool(x)) type_error(name, "expected True or False, not " + repr_of(x));
    return x.ptr() == Py_True;
}

std::optional<std::string> Keywords::text(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (!nb::isinstance<nb::str>(x)) type_error(name, "expected a string, not " + type_of(x));
    return nb::cast<std::string>(x);
}

std::optional<std::vector<double>> Keywords::numbers(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    std::vector<double> out;
    auto one = [&](nb::handle v) {
        if (is_bool(v) || !(is_int(v) || is_float(v)))
            type_error(name, "expected a number or a sequence of numbers, not " + repr_of(v));
        out.push_back(nb::cast<double>(v));
    };
    if (is_int(x) || is_float(x) || is_bool(x)) {
        one(x);
    } else if (nb::isinstance<nb::sequence>(x) && !nb::isinstance<nb::str>(x)) {
        for (nb::handle v : x) one(v);
    } else {
        type_error(name, "expected a number or a sequence of numbers, not " + type_of(x));
    }
    return out;
}

std::optional<std::vector<std::string>> Keywords::texts(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (nb::isinstance<nb::str>(x) || !nb::isinstance<nb::sequence>(x))
        type_error(name, "expected a sequence of names, not " + type_of(x));
    std::vector<std::string> out;
    for (nb::handle v : x) {
        if (!nb::isinstance<nb::str>(v))
            type_error(name, "expected a sequence of names, not one holding " + type_of(v));
        out.push_back(nb::cast<std::string>(v));
    }
    return out;
}

std::optional<std::vector<std::string>> Keywords::settings(const char* name) {
    const nb::object x = take(name);
    if (x.is_none()) return std::nullopt;
    if (!nb::isinstance<nb::dict>(x) && !nb::hasattr(x, "items"))
        type_error(name, "expected a mapping of recipe keys to values");
    std::vector<std::string> out;
    for (nb::handle item : x.attr("items")()) {
        const nb::handle key = item[0], value = item[1];
        const std::string v =
            is_bool(value) ? (value.ptr() == Py_True ? "true" : "false") : nb::cast<std::string>(nb::str(value));
        out.push_back(nb::cast<std::string>(nb::str(key)) + "=" + v);
    }
    return out;
}

void Keywords::finish() const {
    for (auto [key, value] : kwargs_) {
        const std::string name = nb::cast<std::string>(key);
        if (std::find(read_.begin(), read_.end(), name) == read_.end())
            type_error(name.c_str(), "not an argument of this call");
    }
}

nb::object to_python(const nlohmann::json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::object: {
            nb::dict d;
            for (const auto& [k, v] : j.items()) d[k.c_str()] = to_python(v);
            return d;
        }
        case nlohmann::json::value_t::array: {
            nb::list l;
            for (const auto& v : j) l.append(to_python(v));
            return l;
        }
        case nlohmann::json::value_t::string:
            return nb::str(j.get_ref<const std::string&>().c_str());
        case nlohmann::json::value_t::boolean:
            return nb::bool_(j.get<bool>());
        case nlohmann::json::value_t::number_integer:
            return nb::int_(j.get<std::int64_t>());
        case nlohmann::json::value_t::number_unsigned:
            return nb::steal(PyLong_FromUnsignedLongLong(j.get<std::uint64_t>()));
        case nlohmann::json::value_t::number_float:
            return nb::float_(j.get<double>());
        default:
            return nb::none();
    }
}

}  // namespace roundscope::python
