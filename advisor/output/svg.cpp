#include "advisor/output/svg.hpp"

#include <algorithm>
#include <cmath>
#include <locale>
#include <sstream>

namespace ff {
namespace {

// Advance widths in em of ASCII 32–126, read from DejaVuSans.ttf and
// DejaVuSans-Bold.ttf (2.37, hmtx through the format-4 cmap).
constexpr double kRegular[95] = {
    0.318, 0.401, 0.460, 0.838, 0.636, 0.950, 0.780, 0.275, 0.390, 0.390, 0.500, 0.838, 0.318, 0.361, 0.318, 0.337,
    0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.337, 0.337, 0.838, 0.838, 0.838, 0.531,
    1.000, 0.684, 0.686, 0.698, 0.770, 0.632, 0.575, 0.775, 0.752, 0.295, 0.295, 0.656, 0.557, 0.863, 0.748, 0.787,
    0.603, 0.787, 0.695, 0.635, 0.611, 0.732, 0.684, 0.989, 0.685, 0.611, 0.685, 0.390, 0.337, 0.390, 0.838, 0.500,
    0.500, 0.613, 0.635, 0.550, 0.635, 0.615, 0.352, 0.635, 0.634, 0.278, 0.278, 0.579, 0.278, 0.974, 0.634, 0.612,
    0.635, 0.635, 0.411, 0.521, 0.392, 0.634, 0.592, 0.818, 0.592, 0.592, 0.525, 0.636, 0.337, 0.636, 0.838};
constexpr double kBold[95] = {
    0.348, 0.456, 0.521, 0.838, 0.696, 1.002, 0.872, 0.306, 0.457, 0.457, 0.523, 0.838, 0.380, 0.415, 0.380, 0.365,
    0.696, 0.696, 0.696, 0.696, 0.696, 0.696, 0.696, 0.696, 0.696, 0.696, 0.400, 0.400, 0.838, 0.838, 0.838, 0.580,
    1.000, 0.774, 0.762, 0.734, 0.830, 0.683, 0.683, 0.821, 0.837, 0.372, 0.372, 0.775, 0.637, 0.995, 0.837, 0.850,
    0.733, 0.850, 0.770, 0.720, 0.682, 0.812, 0.774, 1.103, 0.771, 0.724, 0.725, 0.457, 0.365, 0.457, 0.838, 0.500,
    0.500, 0.675, 0.716, 0.593, 0.716, 0.678, 0.435, 0.716, 0.712, 0.343, 0.343, 0.665, 0.343, 1.042, 0.712, 0.687,
    0.716, 0.716, 0.493, 0.595, 0.478, 0.712, 0.652, 0.924, 0.645, 0.652, 0.582, 0.712, 0.365, 0.712, 0.838};
constexpr double kMonoAdvance = 0.602;
constexpr double kMargin = 16;

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// A coordinate to a tenth of a pixel, "50" rather than "50.0".
std::string coord(double v) {
  std::string s = svg_num(v, 1);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

}  // namespace

std::string svg_escape(const std::string& s) {
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

std::string svg_num(double v, int decimals) {
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o.setf(std::ios::fixed);
  o.precision(decimals);
  o << v;
  return o.str();
}

double nice_step(double span, int intervals) {
  double raw = span / intervals, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

LogAxis::LogAxis(double min, double max) {
  min = std::max(min, 1e-300), max = std::max(max, min * 1.01);
  auto decade = [](double v) { return std::pow(10.0, std::floor(std::log10(v))); };
  lo = decade(min);
  for (double m : {2.0, 5.0})
    if (m * decade(min) <= min) lo = m * decade(min);
  hi = 10 * decade(max);
  for (double m : {5.0, 2.0, 1.0})
    if (m * decade(max) >= max) hi = m * decade(max);
  const bool fine = hi / lo < 100.0001;
  for (double d = decade(lo); d <= hi * 1.0001; d *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if ((fine || m == 1) && m * d >= lo * 0.9999 && m * d <= hi * 1.0001) ticks.push_back(m * d);
}

double LogAxis::fraction(double v) const { return std::log(v / lo) / std::log(hi / lo); }

double text_width(const std::string& text, double font_px, bool bold) {
  const double* table = bold ? kBold : kRegular;
  double em = 0;
  for (char c : text) {
    if (continuation(c)) continue;
    const int code = static_cast<unsigned char>(c);
    em += code >= 32 && code < 127 ? table[code - 32] : 1.0;
  }
  return em * font_px;
}

double mono_width(const std::string& text, double font_px) {
  return kMonoAdvance * font_px * double(std::count_if(text.begin(), text.end(), [](char c) { return !continuation(c); }));
}

void SvgCanvas::text(double x, double y, const std::string& s, Anchor a, double font_px, const std::string& attrs,
                     bool bold, bool mono) {
  const double w = mono ? mono_width(s, font_px) : text_width(s, font_px, bold);
  right_ = std::max(right_, a == Anchor::Start ? x + w : a == Anchor::Middle ? x + w / 2 : x);
  body_ += "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\"";
  if (a != Anchor::Start) body_ += a == Anchor::Middle ? " text-anchor=\"middle\"" : " text-anchor=\"end\"";
  if (font_px != 12) body_ += " font-size=\"" + svg_num(font_px, 0) + "\"";
  if (bold) body_ += " font-weight=\"bold\"";
  if (mono) body_ += " xml:space=\"preserve\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\"";
  if (!attrs.empty()) body_ += " " + attrs;
  body_ += '>';
  body_ += svg_escape(s);
  body_ += "</text>\n";
}

void SvgCanvas::element(const std::string& svg, double right) {
  body_ += svg;
  right_ = std::max(right_, right);
}

std::string SvgCanvas::document(const std::string& title, double min_width, double height) const {
  const double width = std::ceil(std::max({min_width, right_ + kMargin, 2 * kMargin + text_width(title, 16, true)}));
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
         "width=\"" + svg_num(width, 0) + "\" height=\"" + svg_num(height, 0) + "\" viewBox=\"0 0 " +
         svg_num(width, 0) + " " + svg_num(height, 0) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" + svg_num(kMargin, 0) +
         "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" + svg_escape(title) + "</text>\n" + body_ + "</svg>\n";
}

}  // namespace ff
