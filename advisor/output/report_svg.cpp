#include "advisor/output/report_svg.hpp"

#include <algorithm>
#include <cmath>

#include "advisor/output/svg.hpp"

namespace ff {
namespace {

// Okabe–Ito: distinguishable under the common colour-vision deficiencies.
// Compute is neutral grey so the coloured communication stands out; spare
// colours stand ready for more axes.
constexpr const char* kComputeColour = "#bbbbbb";
constexpr const char* kAxisColours[] = {"#e69f00", "#56b4e9", "#009e73", "#cc79a7", "#0072b2", "#d55e00", "#f0e442"};
static_assert(std::size(kAxisColours) >= size_t(kBreakdownParts - 1), "a colour per axis, idle and host link");

constexpr double kPad = 16;
constexpr double kPlotW = 560, kBarH = 22, kRowH = 32, kTop = 68;

double clean(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

}  // namespace

BreakdownParts breakdown_parts(double compute_s, const PerAxis<double>& comm_s, double idle_s, double host_s) {
  BreakdownParts p{compute_s};
  for (int a = 0; a < kAxisCount; ++a) p[1 + a] = comm_s[a];
  p[1 + kAxisCount] = idle_s;
  p[2 + kAxisCount] = host_s;
  return p;
}

const char* part_name(int k) {
  if (k == 0) return "compute";
  if (k <= kAxisCount) return axis_name(kAxes[k - 1]);
  return k == 1 + kAxisCount ? "pipeline idle" : "host link";
}
const char* part_colour(int k) { return k == 0 ? kComputeColour : kAxisColours[k - 1]; }

std::string breakdown_svg(const std::vector<BreakdownBar>& bars, const std::string& title) {
  SvgCanvas c;
  if (bars.empty()) {
    c.text(kPad, 58, "no configurations", Anchor::Start, 12, "fill=\"#555555\"");
    return c.document(title, 360, 80);
  }

  std::vector<BreakdownParts> seg;
  std::vector<std::string> ends;
  double longest = mono_width("#1 x"), tmax = 0;
  for (const auto& b : bars) {
    BreakdownParts s = breakdown_parts(b.compute_s, b.exposed_s, b.idle_s, b.host_s);
    double total = 0;
    for (double& v : s) total += v = clean(v);
    seg.push_back(s);
    ends.push_back(svg_num(total, 2) + " s \u00b7 " + svg_num(clean(b.memory_gib), 1) + " GiB");
    longest = std::max(longest, mono_width(b.label));
    tmax = std::max(tmax, total);
  }
  // The axis ends on a tick so the last gridline frames the longest bar.
  double step = tmax > 0 ? nice_step(tmax) : 1, axis_end = std::max(step, std::ceil(tmax / step - 1e-9) * step);
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  double left = kPad + longest + 12;
  double scale = kPlotW / axis_end, axis_y = kTop + bars.size() * kRowH;

  // The legend sits above the plot, aligned with the bars it explains.
  double lx = left;
  for (int k = 0; k < kBreakdownParts; ++k) {
    c.element("<rect x=\"" + svg_num(lx, 1) + "\" y=\"40\" width=\"12\" height=\"12\" fill=\"" + part_colour(k) + "\"/>",
              lx + 12);
    c.text(lx + 17, 50, part_name(k));
    lx += 17 + text_width(part_name(k)) + 22;
  }
  c.text(lx, 50, "(exposed communication per axis)", Anchor::Start, 12, "fill=\"#555555\"");

  // Gridlines first so the bars paint over them.
  for (int i = 0; i * step <= axis_end + step * 1e-6; ++i) {
    double x = left + i * step * scale;
    c.element("<line x1=\"" + svg_num(x, 1) + "\" y1=\"" + svg_num(kTop - 6, 0) + "\" x2=\"" + svg_num(x, 1) +
                  "\" y2=\"" + svg_num(axis_y + 5, 0) + "\" stroke=\"" + (i ? "#e4e4e4" : "#333333") + "\"/>",
              x);
    c.text(x, axis_y + 19, svg_num(i * step, decimals), Anchor::Middle);
  }
  c.element("<line x1=\"" + svg_num(left, 1) + "\" y1=\"" + svg_num(axis_y, 0) + "\" x2=\"" + svg_num(left + kPlotW, 1) +
                "\" y2=\"" + svg_num(axis_y, 0) + "\" stroke=\"#333333\"/>\n",
            left + kPlotW);
  c.text(left + kPlotW / 2, axis_y + 40, "time per iteration (s)", Anchor::Middle);

  for (size_t r = 0; r < bars.size(); ++r) {
    double y = kTop + r * kRowH, x = left;
    // Left-aligned monospace keeps the labels' columns (runs of spaces) lined
    // up from row to row, like a table.
    c.element("<g><title>" + svg_escape(bars[r].label) + "</title>\n", 0);
    c.text(kPad, y + kBarH / 2 + 4, bars[r].label, Anchor::Start, 12, "", false, true);
    for (int k = 0; k < kBreakdownParts; ++k) {
      double w = seg[r][k] * scale;
      if (w <= 0) continue;
      // A thin white edge separates neighbours that share a hue family.
      c.element("<rect x=\"" + svg_num(x, 2) + "\" y=\"" + svg_num(y, 1) + "\" width=\"" + svg_num(w, 2) +
                    "\" height=\"" + svg_num(kBarH, 0) + "\" fill=\"" + part_colour(k) +
                    "\" stroke=\"white\" stroke-width=\"0.75\"><title>" + part_name(k) + ": " + svg_num(seg[r][k], 2) +
                    " s</title></rect>\n",
                x + w);
      x += w;
    }
    c.text(x + 8, y + kBarH / 2 + 4, ends[r]);
    c.element("</g>\n", 0);
  }
  return c.document(title, 0, axis_y + 54);
}

}  // namespace ff
