#include "advisor/output/scaling_svg.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/output/format.hpp"
#include "advisor/output/svg.hpp"

namespace ff {
namespace {

constexpr const char* kLineColour = "#0072b2";   // tokens/s and its band
constexpr const char* kBandColour = "#56b4e9";
constexpr const char* kMfuColour = "#d55e00";
constexpr double kBarW = 36;

// Runs of consecutive counts with an answer: a gap breaks the line and the band.
std::vector<std::vector<size_t>> runs(const std::vector<ScalingPlotPoint>& p) {
  std::vector<std::vector<size_t>> out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!p[i].found) continue;
    if (i == 0 || !p[i - 1].found || out.empty()) out.emplace_back();
    out.back().push_back(i);
  }
  return out;
}

std::string percent(double f) { return svg_num(100 * f, 1) + "%"; }

}  // namespace

std::string scaling_svg(const std::vector<ScalingPlotPoint>& points, const std::string& title,
                        const std::string& band_note) {
  SvgCanvas c;
  double lo = 1e300, hi = 0, mfu_max = 0;
  for (const auto& p : points) {
    if (!p.found) continue;
    lo = std::min({lo, p.tokens_per_s_low, p.tokens_per_s});
    hi = std::max({hi, p.tokens_per_s_high, p.tokens_per_s});
    mfu_max = std::max(mfu_max, p.mfu);
  }
  if (hi <= 0) {
    c.text(16, 58, "no count has a configuration", Anchor::Start, 12, "fill=\"#555555\"");
    return c.document(title, 360, 80);
  }
  const LogAxis axis(lo, hi);
  const double mfu_top = std::max(0.1, std::ceil(mfu_max * 10 - 1e-9) / 10);
  const double left = kScalingPlotLeft, top = kScalingPlotTop, h = kScalingPlotH;
  const long long first = points.front().gpus;
  const double width = kScalingDoublingPx * (std::log2(double(points.back().gpus) / double(first)) + 1);
  const double right = left + width, bottom = top + h;
  auto x_of = [&](long long gpus) {
    return left + kScalingDoublingPx / 2 + kScalingDoublingPx * std::log2(double(gpus) / double(first));
  };
  auto y_of = [&](double tokens_per_s) { return top + h * (1 - axis.fraction(tokens_per_s)); };
  auto y_mfu = [&](double mfu) { return top + h * (1 - mfu / mfu_top); };

  // Legend: the line, MFU, the band and what it means.
  c.element("<line x1=\"" + svg_num(left) + "\" y1=\"46\" x2=\"" + svg_num(left + 20) + "\" y2=\"46\" stroke=\"" +
                kLineColour + "\" stroke-width=\"2\"/>",
            left + 20);
  c.text(left + 26, 50, "tokens/s (left axis)");
  const double mx = left + 26 + text_width("tokens/s (left axis)") + 24;
  c.element("<line x1=\"" + svg_num(mx) + "\" y1=\"46\" x2=\"" + svg_num(mx + 20) + "\" y2=\"46\" stroke=\"" +
                kMfuColour + "\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>",
            mx + 20);
  c.text(mx + 26, 50, "MFU (right axis)");
  c.element("<rect x=\"" + svg_num(left) + "\" y=\"60\" width=\"20\" height=\"10\" fill=\"" + kBandColour +
                "\" fill-opacity=\"0.3\"/>",
            left + 20);
  c.text(left + 26, 69, band_note, Anchor::Start, 12, "fill=\"#555555\"");

  // Gridlines and ticks: tokens/s on the left, MFU on the right, GPUs below.
  for (double t : axis.ticks) {
    const double y = y_of(t);
    c.element("<line x1=\"" + svg_num(left) + "\" y1=\"" + svg_num(y) + "\" x2=\"" + svg_num(right) + "\" y2=\"" +
                  svg_num(y) + "\" stroke=\"#e4e4e4\"/>",
              right);
    c.text(left - 6, y + 4, advisor::si(t, ""), Anchor::End);
  }
  for (int k = 0; k <= int(std::lround(mfu_top * 10)); ++k)
    c.text(right + 6, y_mfu(k / 10.0) + 4, svg_num(10.0 * k, 0) + "%", Anchor::Start, 12,
           "fill=\"" + std::string(kMfuColour) + "\"");
  c.text(left - 6, top - 16, "tokens/s", Anchor::End);
  c.text(right + 6, top - 16, "MFU", Anchor::Start, 12, "fill=\"" + std::string(kMfuColour) + "\"");
  for (const auto& p : points) {
    const double x = x_of(p.gpus);
    c.element("<line x1=\"" + svg_num(x) + "\" y1=\"" + svg_num(top) + "\" x2=\"" + svg_num(x) + "\" y2=\"" +
                  svg_num(bottom) + "\" stroke=\"#e4e4e4\"/>",
              x);
    c.text(x, bottom + 16, advisor::grouped(p.gpus), Anchor::Middle);
    if (!p.found) c.text(x, bottom - 6, "none fits", Anchor::Middle, 10, "fill=\"#555555\"");
  }
  c.element("<rect x=\"" + svg_num(left) + "\" y=\"" + svg_num(top) + "\" width=\"" + svg_num(width) + "\" height=\"" +
                svg_num(h) + "\" fill=\"none\" stroke=\"#333333\"/>",
            right);
  c.text(left + width / 2, bottom + 34, "GPUs (log scale)", Anchor::Middle);

  // The band under the lines, then the lines, then the points on top.
  for (const auto& run : runs(points)) {
    std::string band, line, mfu;
    for (size_t i : run) band += svg_num(x_of(points[i].gpus)) + "," + svg_num(y_of(points[i].tokens_per_s_high)) + " ";
    for (auto it = run.rbegin(); it != run.rend(); ++it)
      band += svg_num(x_of(points[*it].gpus)) + "," + svg_num(y_of(points[*it].tokens_per_s_low)) + " ";
    for (size_t i : run) {
      line += svg_num(x_of(points[i].gpus)) + "," + svg_num(y_of(points[i].tokens_per_s)) + " ";
      mfu += svg_num(x_of(points[i].gpus)) + "," + svg_num(y_mfu(points[i].mfu)) + " ";
    }
    band.pop_back(), line.pop_back(), mfu.pop_back();
    c.element("<polygon class=\"band\" points=\"" + band + "\" fill=\"" + kBandColour + "\" fill-opacity=\"0.3\"/>\n", 0);
    c.element("<polyline class=\"tokens\" points=\"" + line + "\" fill=\"none\" stroke=\"" + kLineColour +
                  "\" stroke-width=\"2\"/>\n",
              0);
    c.element("<polyline class=\"mfu\" points=\"" + mfu + "\" fill=\"none\" stroke=\"" + kMfuColour +
                  "\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
              0);
  }
  for (const auto& p : points) {
    if (!p.found) continue;
    const double x = x_of(p.gpus), y = y_of(p.tokens_per_s), ym = y_mfu(p.mfu);
    c.element("<circle cx=\"" + svg_num(x) + "\" cy=\"" + svg_num(y) + "\" r=\"4\" fill=\"" + kLineColour +
                  "\"><title>" + advisor::grouped(p.gpus) + " GPUs, " + svg_escape(p.label) + ": " +
                  advisor::si(p.tokens_per_s, "tokens/s") + " (" + advisor::si(p.tokens_per_s_low, "") + "–" +
                  advisor::si(p.tokens_per_s_high, "") + ")</title></circle>\n",
              x + 4);
    c.element("<rect x=\"" + svg_num(x - 3) + "\" y=\"" + svg_num(ym - 3) + "\" width=\"6\" height=\"6\" fill=\"" +
                  kMfuColour + "\"><title>MFU " + percent(p.mfu) + "</title></rect>\n",
              x + 3);
    // The grid's name (the model's 12 px above it) 8 px over the band, or
    // 8 px under it where the MFU mark would sit beneath the text and the
    // plot has room. A white halo keeps the name legible where the MFU line
    // crosses it.
    const double extra = p.model.empty() ? 0 : 12;
    auto clear_of_mfu = [&](double base) {  // 10 px text: 8 px above the baseline, 3 below
      return ym + 4 < base - extra - 8 || ym - 4 > base + 3;
    };
    double base = y_of(p.tokens_per_s_high) - 8;
    if (const double below = y_of(p.tokens_per_s_low) + 16 + extra;
        !clear_of_mfu(base) && clear_of_mfu(below) && below + 3 <= bottom)
      base = below;
    const std::string halo = "stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"";
    c.text(x, base, p.label, Anchor::Middle, 10, halo);
    if (!p.model.empty()) c.text(x, base - 12, p.model, Anchor::Middle, 10, halo);
  }

  // Each count's time per iteration as shares of its terms.
  const double stop = kScalingShareTop, sbottom = stop + kScalingShareH;
  c.text(16, stop - 40, "Share of the time per iteration", Anchor::Start, 13, "", true);
  double lx = left;
  for (int k = 0; k < kBreakdownParts; ++k) {
    c.element("<rect x=\"" + svg_num(lx) + "\" y=\"" + svg_num(stop - 28) + "\" width=\"12\" height=\"12\" fill=\"" +
                  part_colour(k) + "\"/>",
              lx + 12);
    c.text(lx + 17, stop - 18, part_name(k));
    lx += 17 + text_width(part_name(k)) + 18;
  }
  c.text(lx, stop - 18, "(exposed communication per axis)", Anchor::Start, 12, "fill=\"#555555\"");
  for (int k = 0; k <= 4; ++k) {
    const double y = sbottom - kScalingShareH * k / 4;
    c.element("<line x1=\"" + svg_num(left) + "\" y1=\"" + svg_num(y) + "\" x2=\"" + svg_num(right) + "\" y2=\"" +
                  svg_num(y) + "\" stroke=\"" + (k ? "#e4e4e4" : "#333333") + "\"/>",
              right);
    c.text(left - 6, y + 4, svg_num(25.0 * k, 0) + "%", Anchor::End);
  }
  for (const auto& p : points) {
    const double x = x_of(p.gpus);
    c.text(x, sbottom + 16, advisor::grouped(p.gpus), Anchor::Middle);
    if (!p.found) continue;
    double total = 0;
    for (double v : p.parts) total += std::max(0.0, v);
    if (total <= 0) continue;
    double y = sbottom;
    for (int k = 0; k < kBreakdownParts; ++k) {
      const double share = std::max(0.0, p.parts[k]) / total;
      if (share <= 0) continue;
      y -= share * kScalingShareH;
      c.element("<rect class=\"share\" x=\"" + svg_num(x - kBarW / 2) + "\" y=\"" + svg_num(y, 2) + "\" width=\"" +
                    svg_num(kBarW) + "\" height=\"" + svg_num(share * kScalingShareH, 2) + "\" fill=\"" +
                    part_colour(k) + "\" stroke=\"white\" stroke-width=\"0.5\"><title>" +
                    advisor::grouped(p.gpus) + " GPUs, " + part_name(k) + ": " + percent(share) + "</title></rect>\n",
                x + kBarW / 2);
    }
  }
  c.text(left + width / 2, sbottom + 34, "GPUs (log scale)", Anchor::Middle);
  return c.document(title, 0, sbottom + 48);
}

}  // namespace ff
