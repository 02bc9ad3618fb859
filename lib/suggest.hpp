#pragma once
// The suggestion that follows an unknown name ("; did you mean 'e4m3'?"): one rule for every
// table of names (formats, rounding modes, conventions, recipes, recipe keys, options).
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace roundscope {

/// The edit distance between a and b, ignoring case: insertions, deletions, substitutions and
/// swaps of two neighbours each count one (the optimal string alignment distance).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The name of `known` closest to `name`, at most two edits away and fewer than half its own
/// length ("" where none is: "fish" is not "bash"); ties go to the earlier name.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);

/// "; did you mean 'x'?" for closest_name, or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

}  // namespace roundscope
