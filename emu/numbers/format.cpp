#include "emu/numbers/format.hpp"

#include "lib/dtype.hpp"

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

}  // namespace roundscope::emu
