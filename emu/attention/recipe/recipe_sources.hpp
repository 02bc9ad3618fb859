#pragma once
// Where each preset comes from: the kernel or paper it follows and what checks it, one line each,
// for `roundscope recipes` (text and JSON). Kept apart from the presets' settings, which every
// file of the emulator reads.
#include <string_view>

namespace roundscope::emu {

/// The sources of the preset called `name`, in one line; empty for a name that is not a preset.
std::string_view recipe_source(std::string_view name);

}  // namespace roundscope::emu
