#include "emu/format.hpp"

namespace roundscope::emu {
namespace {

struct Alias {
    std::string_view alias;
    const Format* format;
};

// Other spellings of the CLI contract (../shared/CLI.md) and of ml_dtypes / PyTorch.
constexpr Alias aliases[] = {
    {"float64", &f64},          {"float32", &f32},          {"float16", &f16},
    {"bfloat16", &bf16},        {"fp8_e4m3", &e4m3},        {"float8_e4m3fn", &e4m3},
    {"fp8_e5m2", &e5m2},        {"float8_e5m2", &e5m2},     {"fp6_e2m3", &e2m3},
    {"float6_e2m3fn", &e2m3},   {"fp6_e3m2", &e3m2},        {"float6_e3m2fn", &e3m2},
    {"fp4", &e2m1},             {"fp4_e2m1", &e2m1},        {"float4_e2m1fn", &e2m1},
    {"float8_e8m0fnu", &e8m0},  {"float8_e4m3fnuz", &e4m3fnuz}, {"float8_e5m2fnuz", &e5m2fnuz},
};

}  // namespace

const Format* find_format(std::string_view name) {
    for (const Format& f : all_formats)
        if (f.name == name) return &f;
    for (const Alias& a : aliases)
        if (a.alias == name) return a.format;
    return nullptr;
}

}  // namespace roundscope::emu
