#include "emu/numbers/format.hpp"

#include <string>

#include "lib/dtype.hpp"
#include "lib/error.hpp"

namespace roundscope::emu {

const Format* find_format(std::string_view name) {
    for (const Format& f : all_formats)
        if (f.name == name) return &f;
    // Other spellings (ml_dtypes / PyTorch names, the aliases of docs/cli.md) are listed
    // once, with the dtypes; a floating dtype is named after its format.
    if (const auto t = find_dtype_alias(name); t && is_floating(*t))
        for (const Format& f : all_formats)
            if (f.name == roundscope::name(*t)) return &f;
    return nullptr;
}

const Format& format_named(std::string_view name) {
    if (const Format* f = find_format(name)) return *f;
    std::string known;
    for (const Format& f : all_formats) known += (known.empty() ? "" : ", ") + std::string(f.name);
    throw Error("unknown format '" + printable(name) + "' (known: " + known + ")");
}

}  // namespace roundscope::emu
