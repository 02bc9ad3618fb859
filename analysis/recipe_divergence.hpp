#pragma once
// Where a recipe's bits part from a kernel's, once a search has found no recipe that matches them
// all: the query rows whose o or lse differ, and which single change of a recipe key makes a
// sample of those rows match. The change names the step that diverges (the stage and key: exp2,
// P's cast, the row sum, ...) for those rows, though it breaks others (the search found no change
// that helps overall): the kernel does that step differently, or differently on those rows.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/recipe_fit.hpp"

namespace roundscope::analysis {

/// Where `best` (the search's result on `dumps`) differs from their kernel in o or lse; nullopt
/// where it matches every row. Tries every value of every key of `keys` on up to `sample` of the
/// differing rows (spread over them).
std::optional<Divergence> find_divergence(const std::vector<FitDump>& dumps, const FitCandidate& best,
                                          const std::vector<const emu::RecipeKey*>& keys, int threads,
                                          std::uint64_t sample = 32);

}  // namespace roundscope::analysis
