#pragma once
// The sampling error of figures measured on a sample of query rows (emu/attention/inputs/row_sample.hpp),
// by random groups (Wolter, "Introduction to Variance Estimation", 2nd ed., 2007, ch. 2): the
// sample is split at random into G groups, every figure is measured on each group as on the
// whole sample, and the spread of the G values gives the figure's standard error. It needs no
// formula per figure, so every number an analysis reports gets one, whatever it is.
#include <vector>

#include <nlohmann/json.hpp>

namespace roundscope::analysis {

/// The groups a report splits a sample into: 8, or one for every 16 rows where that is fewer
/// (two at least).
inline constexpr std::size_t sampling_groups = 8;

/// For every number in `whole` (members of objects, at any depth, and of the items of arrays
/// whose items are the same things in every group: objects whose labels, their string members,
/// match item by item; other arrays, such as a list of the worst elements, are left out) that
/// every group has too: its standard error, from the same figure in each of `groups` (G >= 2 of
/// them, partitioning the sample).
///  - A figure the groups add up to (a count or a sum over rows, within 1e-9 relative) is a
///    total: variance G / (G - 1) sum_g (x_g - mean)^2.
///  - A figure equal to the largest or the smallest group's, and not their sum, is an extreme
///    (a maximum or a minimum): null, as the sample only bounds it.
///  - Any other (a mean, a fraction, a root mean square, a ratio) estimates the same quantity in
///    each group: variance sum_g (x_g - mean)^2 / (G (G - 1)).
/// The result has the shape of `whole` with those members only (an object with none is left
/// out; a matched array keeps every item, empty ones included).
nlohmann::json sampling_errors(const nlohmann::json& whole, const std::vector<nlohmann::json>& groups);

}  // namespace roundscope::analysis
