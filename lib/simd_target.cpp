#include "lib/simd_target.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "hwy/targets.h"
#include "lib/error.hpp"

namespace roundscope {
namespace {

// The targets held back by limit_simd_target: Highway numbers its targets so that a lower bit
// is a better target, and DisableTargets takes the mask of those to skip.
std::int64_t disabled = 0;

bool same_name(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// Highway's SupportedTargets() points the dispatch at the CPU's best target, whatever the limit
// (it re-detects the CPU); DisableTargets makes the next dispatch choose again, within the limit.
// Every query below ends with it.
std::vector<std::int64_t> targets_within(std::int64_t held_back) {
    hwy::DisableTargets(held_back);
    std::vector<std::int64_t> targets = hwy::SupportedAndGeneratedTargets();
    hwy::DisableTargets(disabled);
    return targets;
}

// Every target of this build the CPU runs, best first.
std::vector<std::int64_t> all_targets() { return targets_within(0); }

}  // namespace

std::string simd_target() { return hwy::TargetName(targets_within(disabled).front()); }

std::vector<std::string> simd_targets() {
    std::vector<std::string> names;
    for (const std::int64_t t : all_targets()) names.emplace_back(hwy::TargetName(t));
    return names;
}

void limit_simd_target(std::string_view name) {
    const std::vector<std::int64_t> targets = all_targets();
    if (same_name(name, "best")) {
        disabled = 0;
        hwy::DisableTargets(disabled);
        return;
    }
    for (const std::int64_t t : targets) {
        if (same_name(name, hwy::TargetName(t))) {
            disabled = t - 1;  // every better target
            hwy::DisableTargets(disabled);
            return;
        }
    }
    std::string choices;
    for (const std::int64_t t : targets) choices += std::string(hwy::TargetName(t)) + ", ";
    throw Error("SIMD target '" + printable(name) + "' is not one this CPU and build run (" + choices + "best)");
}

}  // namespace roundscope
