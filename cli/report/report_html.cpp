#include "cli/report/report_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "cli/markup.hpp"

namespace roundscope::cli {
namespace {

using nlohmann::json;

// Colour-blind-safe (Okabe-Ito) colours, one per head.
const char* colour(std::size_t i) {
    static const char* palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#F0E442", "#000000"};
    return palette[i % 8];
}

struct Series {
    std::string label;
    const char* colour;
    bool dashed;
    std::vector<std::pair<double, double>> points;
};

// Round numbers for an axis: about five ticks covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
    const double span = hi - lo, raw = span / 4, power = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / power < 1.5   ? power
                        : raw / power < 3.5 ? 2 * power
                        : raw / power < 7.5 ? 5 * power
                                            : 10 * power;
    std::vector<double> t;
    for (double x = std::ceil(lo / step) * step; x <= hi + step * 1e-9; x += step)
        t.push_back(std::fabs(x) < step * 1e-9 ? 0 : x);
    return t;
}

// A line chart as inline SVG.
std::string chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  const std::vector<Series>& series) {
    const double width = 380, height = 230, left = 58, right = 10, top = 26, bottom = 40;
    double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
    for (const Series& s : series)
        for (const auto& [x, y] : s.points)
            if (std::isfinite(x) && std::isfinite(y))
                x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">"
        "<text x=\"{}\" y=\"16\" class=\"title\">{}</text>",
        width, height + 22 * ((series.size() + 2) / 3), width, height + 22 * ((series.size() + 2) / 3), left,
        markup_escaped(title));
    if (!std::isfinite(x0)) return svg + fmt::format("<text x=\"{}\" y=\"{}\">no data</text></svg>", left, height / 2);
    if (x1 == x0) x0 -= 1, x1 += 1;
    if (y1 == y0) y0 -= y0 == 0 ? 1 : std::fabs(y0) * 0.1, y1 += y1 == 0 ? 1 : std::fabs(y1) * 0.1;
    const auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (width - left - right); };
    const auto py = [&](double y) { return top + (y1 - y) / (y1 - y0) * (height - top - bottom); };
    for (const double t : ticks(y0, y1))
        svg += fmt::format(
            "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" class=\"grid\"/>"
            "<text x=\"{3}\" y=\"{4:.1f}\" class=\"tick\" text-anchor=\"end\">{5:.3g}</text>",
            left, width - right, py(t), left - 4, py(t) + 4, t);
    for (const double t : ticks(x0, x1))
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{:.4g}</text>", px(t),
                           height - bottom + 14, t);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>", left, top,
                       width - left - right, height - top - bottom);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>",
                       (left + width - right) / 2, height - 8, markup_escaped(x_label));
    svg +=
        fmt::format("<text transform=\"translate(12 {}) rotate(-90)\" class=\"label\" text-anchor=\"middle\">{}</text>",
                    (top + height - bottom) / 2, markup_escaped(y_label));
    for (std::size_t i = 0; i < series.size(); ++i) {
        const Series& s = series[i];
        std::string path;
        for (const auto& [x, y] : s.points)
            if (std::isfinite(x) && std::isfinite(y))
                path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px(x), py(y));
        svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{}/>", path, s.colour,
                           s.dashed ? " stroke-dasharray=\"5 3\"" : "");
        for (const auto& [x, y] : s.points)
            if (std::isfinite(x) && std::isfinite(y) && !s.dashed)
                svg +=
                    fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.2\" fill=\"{}\"/>", px(x), py(y), s.colour);
        const double lx = 8 + static_cast<double>(i % 3) * 124, ly = height + 6 + 22 * static_cast<double>(i / 3);
        svg += fmt::format(
            "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>"
            "<text x=\"{5}\" y=\"{6}\" class=\"tick\">{7}</text>",
            lx, lx + 18, ly, s.colour, s.dashed ? " stroke-dasharray=\"5 3\"" : "", lx + 22, ly + 4,
            markup_escaped(s.label));
    }
    return svg + "</svg>";
}

double number(const json& j, double otherwise = std::numeric_limits<double>::quiet_NaN()) {
    return j.is_number() ? j.get<double>() : otherwise;
}

// The head results by layer, then head, then step (steps missing from the metadata: file order).
using ByStep = std::map<double, const json*>;
std::map<std::int64_t, std::map<std::int64_t, ByStep>> by_layer_head(const json& heads) {
    std::map<std::int64_t, std::map<std::int64_t, ByStep>> out;
    double index = 0;
    for (const json& h : heads) {
        const std::int64_t layer = h["layer"].is_number() ? h["layer"].get<std::int64_t>() : -1;
        out[layer][h["head"].get<std::int64_t>()][h["step"].is_number() ? h["step"].get<double>() : index] = &h;
        ++index;
    }
    return out;
}

const json* run_of(const json& pcollapse, const std::string& order, double scale) {
    for (const json& r : pcollapse["runs"])
        if (r["order"] == order && number(r["scale"]) == scale) return &r;
    return nullptr;
}

std::string cell(double x, const char* spec = "{:.3g}") {
    return std::isfinite(x) ? fmt::format(fmt::runtime(spec), x) : "-";
}

std::string layer_charts(const std::map<std::int64_t, std::map<std::int64_t, ByStep>>& data, const std::string& title,
                         const std::string& y_label,
                         const std::function<void(const json&, double, std::int64_t, std::vector<Series>&)>& add) {
    std::string html = "<div class=\"charts\">";
    for (const auto& [layer, heads] : data) {
        std::vector<Series> series;
        for (const auto& [head, steps] : heads)
            for (const auto& [step, h] : steps) add(*h, step, head, series);
        html += chart(fmt::format("{}, layer {}", title, layer), "step", y_label, series);
    }
    return html + "</div>";
}

// Adds point (x, y) to the series called `label`, creating it.
void add_point(std::vector<Series>& series, const std::string& label, const char* c, bool dashed, double x, double y) {
    for (Series& s : series)
        if (s.label == label) return s.points.push_back({x, y});
    series.push_back({label, c, dashed, {{x, y}}});
}

using Data = std::map<std::int64_t, std::map<std::int64_t, ByStep>>;

// The page's style, title and what was analysed.
std::string page_head(const json& r) {
    std::string html;
    html =
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>roundscope report</title><style>"
        "body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1250px}"
        "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
        "table{border-collapse:collapse;font-size:12.5px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}"
        "th{background:#f4f4f4}td.l,th.l{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:10px}"
        "svg{background:#fff;border:1px solid #eee}svg .title{font-size:12.5px;font-weight:600}"
        "svg .tick{font-size:10px;fill:#444}svg .label{font-size:11px;fill:#222}svg .grid{stroke:#eee}"
        "svg .frame{fill:none;stroke:#999}.note{color:#555;font-size:13px}</style></head><body>";
    html += fmt::format(
        "<h1>roundscope report: {}</h1><p class=\"note\">{} file(s), {} head(s) analysed, {} task(s) "
        "({} from the cache). Recipes:",
        markup_escaped(r["dir"].get<std::string>()), r["files"].size(), r["heads"].size(),
        r["tasks"].get<std::size_t>(), r["cached"].get<std::size_t>());
    for (const json& recipe : r["options"]["recipes"]) html += " " + markup_escaped(recipe["name"].get<std::string>());
    html += fmt::format("; sink: the first {} key(s).</p>", r["options"]["k_sink"].get<int>());
    return html;
}

// Each head's mass on the sink over the steps, a chart a layer.
std::string sink_section(const Data& data) {
    std::string html;
    html +=
        "<h2>Attention sinks</h2><p class=\"note\">The mean share of each query's exact softmax on the sink "
        "key(s), per head, over the training steps.</p>";
    html += layer_charts(data, "mass on the sink", "share of P",
                         [](const json& h, double step, std::int64_t head, auto& s) {
                             add_point(s, fmt::format("head {}", head), colour(static_cast<std::size_t>(head)), false,
                                       step, number(h["pcollapse"]["sink_mass"]));
                         });
    return html;
}

// P-collapse measured and predicted over the steps, a chart a layer.
std::string pcollapse_section(const Data& data) {
    std::string html;
    html +=
        "<h2>P-collapse under fa3-fp8 (E4M3 P, S = 1, forward KV order)</h2><p class=\"note\">Solid: the "
        "fraction of non-sink P cast to zero, measured by the emulated kernel; dashed: the prediction from "
        "the scores the kernel holds (running max per KV tile, each row's spread).</p>";
    html +=
        layer_charts(data, "P cast to zero", "fraction", [](const json& h, double step, std::int64_t head, auto& s) {
            const json* run = run_of(h["pcollapse"], "forward", 1);
            if (!run) return;
            const char* c = colour(static_cast<std::size_t>(head));
            add_point(s, fmt::format("head {}", head), c, false, step, number((*run)["underflow_fraction"]));
            add_point(s, fmt::format("head {} predicted", head), c, true, step, number((*run)["predicted_fraction"]));
        });
    return html;
}

// The delta error accumulated over the steps, a chart a layer (none without dO).
std::string bias_section(const json& r) {
    std::string html;
    if (r["bias_over_steps"].empty()) return html;
    html +=
        "<h2>delta = rowsum(dO * O): the error summed over rows, accumulated over steps</h2><p class=\"note\">"
        "Solid: with the kernel's own O from the dump (the emulated fa2-bf16 where the dump has none); dashed: "
        "the emulated fa2-bf16 with the max adjustment. One sign step after step is the bias that reaches the "
        "weights.</p>"
        "<div class=\"charts\">";
    std::map<std::int64_t, std::vector<Series>> layers;
    for (const json& s : r["bias_over_steps"]) {
        const auto head = s["head"].get<std::int64_t>();
        std::vector<Series>& series = layers[s["layer"].get<std::int64_t>()];
        Series kernel{fmt::format("head {}", head), colour(static_cast<std::size_t>(head)), false, {}},
            adjusted{fmt::format("head {} adjusted", head), colour(static_cast<std::size_t>(head)), true, {}};
        for (std::size_t i = 0; i < s["steps"].size(); ++i) {
            kernel.points.push_back({number(s["steps"][i]), number(s["cumulative"][i])});
            adjusted.points.push_back({number(s["steps"][i]), number(s["max_adjust_cumulative"][i])});
        }
        series.push_back(kernel), series.push_back(adjusted);
    }
    for (const auto& [layer, series] : layers)
        html += chart(fmt::format("cumulative delta error, layer {}", layer), "step", "sum of coefficients", series);
    html += "</div>";
    return html;
}

// Every head at its last step, a row each.
std::string heads_table(const json& r, const Data& data) {
    std::string html;
    html +=
        "<h2>Every head at its last step</h2><table><tr><th class=\"l\">layer</th><th>head</th><th>step</th>"
        "<th>sink mass</th><th>effective Delta</th><th>spread</th><th>P-collapse fwd S=1 (pred.)</th>"
        "<th>rev S=1</th><th>fwd S=256</th><th>leak MXFP4 pairs</th><th>leak MXFP8 pairs</th>"
        "<th>f16 naive margin</th><th>delta error</th><th>positive steps (sign test)</th>";
    for (const json& recipe : r["options"]["recipes"])
        html += fmt::format("<th>rel. rms of O, {}</th>", markup_escaped(recipe["name"].get<std::string>()));
    html += "</tr>";
    std::map<std::pair<std::int64_t, std::int64_t>, const json*> bias_series;
    for (const json& s : r["bias_over_steps"])
        bias_series[{s["layer"].get<std::int64_t>(), s["head"].get<std::int64_t>()}] = &s;
    for (const auto& [layer, heads] : data) {
        for (const auto& [head, steps] : heads) {
            const json& h = *steps.rbegin()->second;
            const json& p = h["pcollapse"];
            const json *f1 = run_of(p, "forward", 1), *r1 = run_of(p, "reverse", 1), *f256 = run_of(p, "forward", 256);
            const auto leak = [&](const char* f) {
                return h.contains("leak") && h["leak"].contains(f)
                           ? std::to_string(h["leak"][f]["leaking_pairs"].get<std::uint64_t>())
                           : "-";
            };
            double margin = std::numeric_limits<double>::quiet_NaN();
            for (const json& f : h["headroom"]["formats"])
                if (f["format"] == "f16") margin = number(f["min_naive_margin"]);
            const auto bias = bias_series.find({layer, head});
            html += fmt::format(
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td>"
                "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                layer, head, h["step"].is_number() ? h["step"].dump() : "-", cell(number(p["sink_mass"])),
                cell(number(p["effective_sink_strength"])), cell(number(p["score_spread"])),
                f1 ? cell(number((*f1)["underflow_fraction"]), "{:.4f}") : "-",
                f1 ? cell(number((*f1)["predicted_fraction"]), "{:.4f}") : "-",
                r1 ? cell(number((*r1)["underflow_fraction"]), "{:.4f}") : "-",
                f256 ? cell(number((*f256)["underflow_fraction"]), "{:.4f}") : "-", leak("mxfp4"), leak("mxfp8_e4m3"),
                cell(margin), bias == bias_series.end() ? "-" : cell(number(bias->second->at("cumulative").back())),
                bias == bias_series.end()
                    ? "-"
                    : fmt::format("{}/{} (p {:.2g})", bias->second->at("positive_steps").get<int>(),
                                  bias->second->at("steps").size(), bias->second->at("sign_test_p").get<double>()));
            for (const json& recipe : r["options"]["recipes"]) {
                const std::string name = recipe["name"];
                html += "<td>" + (h["attribute"].contains(name) ? cell(number(h["attribute"][name]["all_low"])) : "-") +
                        "</td>";
            }
            html += "</tr>";
        }
    }
    html += "</table>";
    return html;
}

// The kernel's outputs against the truth and each recipe, a row a file.
std::string compare_table(const json& r) {
    std::string html;
    if (r["compare"].empty()) return html;
    html +=
        "<h2>The kernel's outputs against the truth and each recipe</h2><p class=\"note\">Relative rms error "
        "against the exact attention, and the bits equal to the recipe's emulation (matched / total over o, "
        "lse, dq, dk, dv as the dump holds them).</p><table><tr><th class=\"l\">file</th>";
    for (const json& recipe : r["options"]["recipes"])
        html += fmt::format("<th>{0}: o rel. rms</th><th>{0}: bits equal</th>",
                            markup_escaped(recipe["name"].get<std::string>()));
    html += "</tr>";
    for (const json& c : r["compare"]) {
        html += "<tr><td class=\"l\">" + markup_escaped(c["file"].get<std::string>()) + "</td>";
        for (const json& recipe : r["options"]["recipes"]) {
            const json& x = c["compare"][recipe["name"].get<std::string>()];
            html += fmt::format("<td>{}</td><td>{}/{} ({:.1f}%)</td>", cell(number(x["outputs"]["o"]["rel_rms"])),
                                x["matched"].get<std::uint64_t>(), x["total"].get<std::uint64_t>(),
                                100.0 * number(x["matched"]) / std::max(1.0, number(x["total"])));
        }
        html += "</tr>";
    }
    html += "</table>";
    return html;
}

}  // namespace

std::string report_html(const json& r) {
    const Data data = by_layer_head(r["heads"]);
    return page_head(r) + sink_section(data) + pcollapse_section(data) + bias_section(r) + heads_table(r, data) +
           compare_table(r) +
           "<p class=\"note\">Written by roundscope report; every figure is in report.json beside this "
           "page.</p></body></html>\n";
}

}  // namespace roundscope::cli
