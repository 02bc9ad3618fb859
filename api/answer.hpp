#pragma once
// What a library call gives back: its typed result, and the result's JSON (docs/cli.md).
#include <nlohmann/json.hpp>

namespace roundscope::api {

template <class Result>
struct Answer {
    Result result;
    nlohmann::json json;
};

}  // namespace roundscope::api
