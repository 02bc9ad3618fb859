#pragma once
// The analyses' results as the JSON of docs/cli.md: one function per pass, shared by its
// command and by `roundscope demo`.
#include <nlohmann/json.hpp>

#include "analysis/attribute.hpp"
#include "analysis/bias_steps.hpp"
#include "analysis/headroom.hpp"
#include "analysis/kernel_compare.hpp"
#include "analysis/leak.hpp"
#include "analysis/pcollapse.hpp"
#include "analysis/rounding_bias.hpp"

namespace roundscope::api {

nlohmann::json pcollapse_json(const analysis::PCollapseResult& r, bool with_scale_properties);
nlohmann::json bias_json(const analysis::BiasResult& b);
/// The first step's bias (with its fixes), and with several steps each step and the sums over
/// them.
nlohmann::json bias_steps_json(const analysis::BiasSteps& s);
nlohmann::json attribute_json(const analysis::AttributeResult& r);
nlohmann::json leak_json(const analysis::LeakResult& r);
nlohmann::json headroom_json(const analysis::HeadroomResult& r, bool with_rows);
/// `compare`'s outputs, each against the truth and the emulation, and the bit totals.
nlohmann::json compare_json(const analysis::KernelComparison& r);

/// compare_json of one head's comparison with what merging needs besides (each output's sums
/// and ulp bucket counts), and back: an Error for anything that is not such a part.
nlohmann::json compare_part_json(const analysis::KernelComparison& r);
analysis::KernelComparison compare_part_from_json(const nlohmann::json& j);

}  // namespace roundscope::api
