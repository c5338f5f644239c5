#include "advisor/validation/validation_svg.hpp"

#include <algorithm>
#include <cmath>
#include <locale>
#include <sstream>

#include "advisor/output/svg.hpp"

namespace ff {
namespace {

constexpr double kPad = 16, kPlot = 400, kScatterTop = 64, kLeft = 70;

// Numbers in the classic locale: a decimal comma would break the SVG.
struct Out {
  std::ostringstream o;
  Out() {
    o.imbue(std::locale::classic());
    o.setf(std::ios::fixed);
    o.precision(1);
  }
  template <class T>
  Out& operator<<(const T& v) {
    o << v;
    return *this;
  }
};

std::string ms(double s) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o.setf(std::ios::fixed);
  double v = s * 1e3;
  o.precision(v < 10 ? 2 : v < 100 ? 1 : 0);
  o << v;
  return o.str();
}

}  // namespace

std::string validation_svg(const std::vector<ScatterPoint>& points, const std::vector<PairedBreakdown>& top,
                           const std::string& title, const std::string& subtitle) {
  static constexpr const char* kBarsHeading =
      "Fastest measured: compute and exposed communication, predicted (P) and measured (M)";
  const double bar_row = 18, pair_gap = 12, bar_w = 420;
  // The label column as wide as its longest label, and the picture as wide
  // as its longest line of text, so nothing is cut at the right edge.
  double label_w = 300;
  for (const auto& b : top) label_w = std::max(label_w, mono_width(b.label) + 24);
  const double bars_top = kScatterTop + kPlot + 80;
  const double width = std::max({kLeft + kPlot + 260, kPad + label_w + bar_w + 90,
                                 2 * kPad + text_width(title, 16, true), 2 * kPad + text_width(subtitle),
                                 2 * kPad + text_width(kBarsHeading, 14, true)});
  const double height = bars_top + 40 + top.size() * (2 * bar_row + pair_gap) + 40;
  Out s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\""
    << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' ' << height
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << kPad
    << "\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" << svg_escape(title) << "</text>\n<text x=\"" << kPad
    << "\" y=\"46\" fill=\"#555555\">" << svg_escape(subtitle) << "</text>\n";

  // --- scatter: predicted (x) against measured (y), both in ms, log–log.
  double lo = 1e300, hi = 0;
  for (const auto& p : points)
    for (double v : {p.predicted_s, p.measured_s})
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi == 0) lo = 1e-3, hi = 1;
  const LogAxis axis(lo, hi);
  auto at = [&](double v) { return kPlot * axis.fraction(v); };
  const double x0 = kLeft, y0 = kScatterTop + kPlot;  // the origin, bottom left
  for (double t : axis.ticks) {
    double d = at(t);
    s << "<line x1=\"" << x0 + d << "\" y1=\"" << kScatterTop << "\" x2=\"" << x0 + d << "\" y2=\"" << y0
      << "\" stroke=\"#e4e4e4\"/><line x1=\"" << x0 << "\" y1=\"" << y0 - d << "\" x2=\"" << x0 + kPlot << "\" y2=\""
      << y0 - d << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << x0 + d << "\" y=\"" << y0 + 16
      << "\" text-anchor=\"middle\">" << ms(t) << "</text><text x=\"" << x0 - 6 << "\" y=\"" << y0 - d + 4
      << "\" text-anchor=\"end\">" << ms(t) << "</text>\n";
  }
  s << "<rect x=\"" << x0 << "\" y=\"" << kScatterTop << "\" width=\"" << kPlot << "\" height=\"" << kPlot
    << "\" fill=\"none\" stroke=\"#333333\"/>\n"
    << "<line x1=\"" << x0 << "\" y1=\"" << y0 << "\" x2=\"" << x0 + kPlot << "\" y2=\"" << kScatterTop
    << "\" stroke=\"#333333\" stroke-dasharray=\"5,4\"><title>predicted = measured</title></line>\n"
    << "<text x=\"" << x0 + kPlot / 2 << "\" y=\"" << y0 + 36 << "\" text-anchor=\"middle\">predicted ms per step</text>\n"
    << "<text transform=\"translate(" << kPad + 6 << ',' << kScatterTop + kPlot / 2
    << ") rotate(-90)\" text-anchor=\"middle\">measured ms per step</text>\n";
  for (const auto& p : points) {
    if (!(p.predicted_s > 0 && p.measured_s > 0)) continue;
    const char* c = part_colour(1 + static_cast<int>(p.heaviest_axis));
    s << "<circle cx=\"" << x0 + at(p.predicted_s) << "\" cy=\"" << y0 - at(p.measured_s) << "\" r=\"4.5\" "
      << "fill=\"" << (p.crosses_nodes ? "white" : c) << "\" stroke=\"" << c << "\" stroke-width=\""
      << (p.crosses_nodes ? 2 : 1) << "\"><title>" << svg_escape(p.label) << ": predicted " << ms(p.predicted_s)
      << " ms, measured " << ms(p.measured_s) << " ms</title></circle>\n";
  }
  // The placement check's pair on top, so neither ring hides under a dot.
  bool marked = false;
  for (const auto& p : points) {
    if (p.mark.empty() || !(p.predicted_s > 0 && p.measured_s > 0)) continue;
    marked = true;
    double cx = x0 + at(p.predicted_s), cy = y0 - at(p.measured_s);
    s << "<circle cx=\"" << cx << "\" cy=\"" << cy << "\" r=\"9\" fill=\"none\" stroke=\"#111111\" "
      << "stroke-width=\"1.5\"><title>" << svg_escape(p.mark) << ": " << svg_escape(p.label) << "</title></circle>"
      << "<text x=\"" << cx + 12 << "\" y=\"" << cy - 8 << "\" font-size=\"11\">" << svg_escape(p.mark) << "</text>\n";
  }
  // Legend: what the colour and the hollow mean.
  double lx = x0 + kPlot + 24, ly = kScatterTop + 12;
  s << "<text x=\"" << lx << "\" y=\"" << ly << "\" font-weight=\"bold\">most predicted comm time on</text>\n";
  for (int k = 1; k < kBreakdownParts; ++k) {
    ly += 20;
    s << "<circle cx=\"" << lx + 6 << "\" cy=\"" << ly - 4 << "\" r=\"4.5\" fill=\"" << part_colour(k)
      << "\"/><text x=\"" << lx + 18 << "\" y=\"" << ly << "\">" << part_name(k) << "</text>\n";
  }
  ly += 26;
  s << "<circle cx=\"" << lx + 6 << "\" cy=\"" << ly - 4 << "\" r=\"4.5\" fill=\"white\" stroke=\"#333333\" "
    << "stroke-width=\"2\"/><text x=\"" << lx + 18 << "\" y=\"" << ly << "\">hollow: that axis crosses nodes</text>\n"
    << "<text x=\"" << lx << "\" y=\"" << ly + 22 << "\" fill=\"#555555\">dashed: predicted = measured</text>\n";
  if (marked)
    s << "<circle cx=\"" << lx + 6 << "\" cy=\"" << ly + 40 << "\" r=\"6.5\" fill=\"none\" stroke=\"#111111\" "
      << "stroke-width=\"1.5\"/><text x=\"" << lx + 18 << "\" y=\"" << ly + 44
      << "\">ringed: the placement check's pair</text>\n";

  // --- breakdown of the fastest measured: predicted bar, measured bar.
  double tmax = 0;
  for (const auto& b : top)
    for (const auto* v : {&b.predicted, &b.measured}) {
      double t = 0;
      for (double x : *v) t += std::max(0.0, x);
      tmax = std::max(tmax, t);
    }
  s << "<text x=\"" << kPad << "\" y=\"" << bars_top - 24 << "\" font-size=\"14\" font-weight=\"bold\">"
    << kBarsHeading << "</text>\n";
  double lgx = kPad;
  for (int k = 0; k < kBreakdownParts; ++k) {
    s << "<rect x=\"" << lgx << "\" y=\"" << bars_top - 12 << "\" width=\"12\" height=\"12\" fill=\"" << part_colour(k)
      << "\"/><text x=\"" << lgx + 17 << "\" y=\"" << bars_top - 2 << "\">" << part_name(k) << "</text>\n";
    lgx += 17 + text_width(part_name(k)) + 18;
  }
  const double scale = tmax > 0 ? bar_w / tmax : 0, bx = kPad + label_w;
  double y = bars_top + 14;
  for (const auto& b : top) {
    s << "<text x=\"" << kPad << "\" y=\"" << y + bar_row + 2 << "\" xml:space=\"preserve\" "
      << "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\">" << svg_escape(b.label) << "</text>\n";
    for (int which = 0; which < 2; ++which) {
      const auto& v = which ? b.measured : b.predicted;
      double x = bx, total = 0;
      s << "<text x=\"" << bx - 14 << "\" y=\"" << y + bar_row - 5 << "\">" << (which ? 'M' : 'P') << "</text>\n";
      for (int k = 0; k < kBreakdownParts; ++k) {
        double w = std::max(0.0, v[k]) * scale;
        total += std::max(0.0, v[k]);
        if (w <= 0) continue;
        s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << bar_row - 3
          << "\" fill=\"" << part_colour(k) << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << part_name(k)
          << ": " << ms(v[k]) << " ms</title></rect>\n";
        x += w;
      }
      s << "<text x=\"" << x + 6 << "\" y=\"" << y + bar_row - 5 << "\">" << ms(total) << " ms</text>\n";
      y += bar_row;
    }
    y += pair_gap;
  }
  s << "</svg>\n";
  return s.o.str();
}

}  // namespace ff
