#include "advisor/output/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <locale>
#include <sstream>

namespace ff {
namespace {

// Okabe–Ito: distinguishable under the common colour-vision deficiencies.
// Compute is neutral grey so the coloured communication stands out; spare
// colours stand ready for more axes.
constexpr const char* kComputeColour = "#bbbbbb";
constexpr const char* kAxisColours[] = {"#e69f00", "#56b4e9", "#009e73", "#cc79a7", "#0072b2", "#d55e00", "#f0e442"};
static_assert(std::size(kAxisColours) >= size_t(kBreakdownParts - 1), "a colour per axis, idle and host link");

constexpr double kPad = 16, kLabelFont = 12, kMonoAdvance = 0.62 * kLabelFont;
// DejaVu Sans at 12 px: lower case averages about 6.6 px; 7 leaves room.
constexpr double kTextAdvance = 7.0;
constexpr double kPlotW = 560, kBarH = 22, kRowH = 32, kTop = 68;

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Monospace width is per code point, not per UTF-8 byte.
size_t glyphs(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// Classic locale: a decimal comma would make the SVG numbers invalid.
std::string fmt(double v, int decimals) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o.setf(std::ios::fixed);
  o.precision(decimals);
  o << v;
  return o.str();
}

double clean(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

// Steps of 1, 2 or 5 × 10^k giving at most ~8 intervals: fine enough that the
// axis, rounded up to a tick, wastes little width past the longest bar.
double nice_step(double span) {
  double raw = span / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

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
  std::ostringstream o;
  o.imbue(std::locale::classic());
  auto header = [&](double w, double h) {
    o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\""
      << fmt(w, 0) << "\" height=\"" << fmt(h, 0) << "\" viewBox=\"0 0 " << fmt(w, 0) << ' ' << fmt(h, 0)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << kPad
      << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" << esc(title) << "</text>\n";
  };
  if (bars.empty()) {
    header(std::max(360.0, 2 * kPad + 9.5 * glyphs(title)), 80);
    o << "<text x=\"" << kPad << "\" y=\"58\" fill=\"#555555\">no configurations</text>\n</svg>\n";
    return o.str();
  }

  std::vector<BreakdownParts> seg;
  std::vector<std::string> ends;
  size_t longest = 0, longest_end = 0;
  double tmax = 0;
  for (const auto& b : bars) {
    BreakdownParts s = breakdown_parts(b.compute_s, b.exposed_s, b.idle_s, b.host_s);
    double total = 0;
    for (double& v : s) total += v = clean(v);
    seg.push_back(s);
    ends.push_back(fmt(total, 2) + " s \u00b7 " + fmt(clean(b.memory_gib), 1) + " GiB");
    longest = std::max(longest, glyphs(b.label));
    longest_end = std::max(longest_end, glyphs(ends.back()));
    tmax = std::max(tmax, total);
  }
  // The axis ends on a tick so the last gridline frames the longest bar.
  double step = tmax > 0 ? nice_step(tmax) : 1, axis_end = std::max(step, std::ceil(tmax / step - 1e-9) * step);
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  double left = kPad + std::max<double>(longest, 4) * kMonoAdvance + 12;
  double scale = kPlotW / axis_end, axis_y = kTop + bars.size() * kRowH;
  // The legend sits above the plot, aligned with the bars it explains; the
  // picture is as wide as its longest run of text (bars and their ends, the
  // title, the legend), so nothing is cut at the right edge.
  static constexpr const char* kLegendNote = "(exposed communication per axis)";
  auto legend_advance = [](const char* name) { return 17 + kTextAdvance * glyphs(name) + 22; };
  double legend_end = left + kTextAdvance * glyphs(kLegendNote);
  for (int k = 0; k < kBreakdownParts; ++k) legend_end += legend_advance(part_name(k));
  double width = std::max({left + kPlotW + 10 + longest_end * 6.8 + kPad, 2 * kPad + 9.5 * glyphs(title),
                           legend_end + kPad});
  double height = axis_y + 54;
  header(width, height);

  double lx = left;
  for (int k = 0; k < kBreakdownParts; ++k) {
    o << "<rect x=\"" << fmt(lx, 1) << "\" y=\"40\" width=\"12\" height=\"12\" fill=\"" << part_colour(k) << "\"/>"
      << "<text x=\"" << fmt(lx + 17, 1) << "\" y=\"50\">" << part_name(k) << "</text>\n";
    lx += legend_advance(part_name(k));
  }
  o << "<text x=\"" << fmt(lx, 1) << "\" y=\"50\" fill=\"#555555\">" << kLegendNote << "</text>\n";

  // Gridlines first so the bars paint over them.
  for (int i = 0; i * step <= axis_end + step * 1e-6; ++i) {
    double x = left + i * step * scale;
    o << "<line x1=\"" << fmt(x, 1) << "\" y1=\"" << kTop - 6 << "\" x2=\"" << fmt(x, 1) << "\" y2=\"" << axis_y + 5
      << "\" stroke=\"" << (i ? "#e4e4e4" : "#333333") << "\"/>"
      << "<text x=\"" << fmt(x, 1) << "\" y=\"" << axis_y + 19 << "\" text-anchor=\"middle\">"
      << fmt(i * step, decimals) << "</text>\n";
  }
  o << "<line x1=\"" << left << "\" y1=\"" << axis_y << "\" x2=\"" << fmt(left + kPlotW, 1) << "\" y2=\"" << axis_y
    << "\" stroke=\"#333333\"/>\n<text x=\"" << fmt(left + kPlotW / 2, 1) << "\" y=\"" << axis_y + 40
    << "\" text-anchor=\"middle\">time per iteration (s)</text>\n";

  for (size_t r = 0; r < bars.size(); ++r) {
    double y = kTop + r * kRowH, x = left;
    // Left-aligned monospace with xml:space keeps the labels' columns (runs of
    // spaces) lined up from row to row, like a table.
    o << "<g><title>" << esc(bars[r].label) << "</title>\n<text x=\"" << kPad << "\" y=\""
      << fmt(y + kBarH / 2 + 4, 1) << "\" xml:space=\"preserve\" font-family=\"DejaVu Sans Mono, "
      << "Menlo, Consolas, monospace\">" << esc(bars[r].label) << "</text>\n";
    for (int k = 0; k < kBreakdownParts; ++k) {
      double w = seg[r][k] * scale;
      if (w <= 0) continue;
      // A thin white edge separates neighbours that share a hue family.
      o << "<rect x=\"" << fmt(x, 2) << "\" y=\"" << fmt(y, 1) << "\" width=\"" << fmt(w, 2) << "\" height=\"" << kBarH
        << "\" fill=\"" << part_colour(k) << "\" stroke=\"white\" stroke-width=\"0.75\"><title>" << part_name(k) << ": "
        << fmt(seg[r][k], 2) << " s</title></rect>\n";
      x += w;
    }
    o << "<text x=\"" << fmt(x + 8, 1) << "\" y=\"" << fmt(y + kBarH / 2 + 4, 1) << "\">" << ends[r] << "</text></g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ff
