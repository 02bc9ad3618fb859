#include "analysis/sampling_error.hpp"

#include <algorithm>
#include <cmath>

#include "lib/error.hpp"

namespace roundscope::analysis {
namespace {

nlohmann::json standard_error(double whole, const std::vector<double>& x) {
    const auto g = static_cast<double>(x.size());
    double sum = 0, magnitude = 0;
    for (const double v : x) sum += v, magnitude += std::fabs(v);
    const double mean = sum / g;
    double squares = 0;
    for (const double v : x) squares += (v - mean) * (v - mean);
    if (squares == 0) return 0.0;
    if (std::fabs(whole - sum) <= 1e-9 * std::max(1.0, magnitude)) return std::sqrt(g / (g - 1) * squares);
    if (whole == *std::max_element(x.begin(), x.end()) || whole == *std::min_element(x.begin(), x.end()))
        return nullptr;
    return std::sqrt(squares / (g * (g - 1)));
}

nlohmann::json errors_of(const nlohmann::json& whole, const std::vector<const nlohmann::json*>& groups);

// Whether item i of an array is the same thing in every group: objects with the same labels
// (members that are strings), one label at least, as a list of configurations has them.
bool same_item(const nlohmann::json& item, const std::vector<const nlohmann::json*>& groups, std::size_t i) {
    if (!item.is_object()) return false;
    bool labelled = false;
    for (const auto& [key, value] : item.items()) {
        if (!value.is_string()) continue;
        labelled = true;
        for (const nlohmann::json* g : groups)
            if (!(*g)[i].is_object() || !(*g)[i].contains(key) || (*g)[i][key] != value) return false;
    }
    return labelled;
}

nlohmann::json array_errors(const nlohmann::json& whole, const std::vector<const nlohmann::json*>& groups) {
    for (const nlohmann::json* g : groups)
        if (!g->is_array() || g->size() != whole.size()) return nullptr;
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < whole.size(); ++i) {
        if (!same_item(whole[i], groups, i)) return nullptr;
        std::vector<const nlohmann::json*> items;
        for (const nlohmann::json* g : groups) items.push_back(&(*g)[i]);
        out.push_back(errors_of(whole[i], items));
    }
    return out;
}

nlohmann::json errors_of(const nlohmann::json& whole, const std::vector<const nlohmann::json*>& groups) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : whole.items()) {
        std::vector<const nlohmann::json*> members;
        for (const nlohmann::json* g : groups)
            if (g->is_object() && g->contains(key)) members.push_back(&(*g)[key]);
        if (members.size() != groups.size()) continue;
        if (value.is_object()) {
            nlohmann::json inner = errors_of(value, members);
            if (!inner.empty()) out[key] = std::move(inner);
        } else if (value.is_array() && !value.empty()) {
            nlohmann::json items = array_errors(value, members);
            if (!items.is_null()) out[key] = std::move(items);
        } else if (value.is_number() && std::isfinite(value.get<double>())) {
            std::vector<double> x;
            for (const nlohmann::json* m : members)
                if (m->is_number() && std::isfinite(m->get<double>())) x.push_back(m->get<double>());
            if (x.size() == groups.size()) out[key] = standard_error(value.get<double>(), x);
        }
    }
    return out;
}

}  // namespace

nlohmann::json sampling_errors(const nlohmann::json& whole, const std::vector<nlohmann::json>& groups) {
    if (groups.size() < 2) throw Error("sampling errors need at least two groups");
    std::vector<const nlohmann::json*> g;
    for (const nlohmann::json& x : groups) g.push_back(&x);
    return whole.is_object() ? errors_of(whole, g) : nlohmann::json::object();
}

}  // namespace roundscope::analysis
