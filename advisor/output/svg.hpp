#pragma once
// What every picture shares: escaping, numbers in the classic locale, round
// ticks on linear and log axes, and how wide a run of text is, so that a
// picture is sized to hold all of its text (SvgCanvas) instead of cutting it
// at the right edge.
#include <string>
#include <vector>

namespace ff {

std::string svg_escape(const std::string& s);
// Classic locale: a decimal comma would make the SVG's numbers invalid.
std::string svg_num(double v, int decimals = 1);

// Steps of 1, 2 or 5 × 10^k giving at most `intervals` intervals over span.
double nice_step(double span, int intervals = 8);

// From a 1-2-5 value at or below min to one at or above max; ticks at 1, 2
// and 5 × 10^k up to two decades, else at the decades.
struct LogAxis {
  double lo = 1, hi = 10;
  std::vector<double> ticks;
  LogAxis(double min, double max);
  double fraction(double v) const;  // 0 at lo, 1 at hi
};

// Width in px of text in DejaVu Sans (the first family the pictures name;
// their fallbacks are narrower), from the font's advance widths; a character
// outside ASCII counts one em. Mono: DejaVu Sans Mono, 0.602 em each.
double text_width(const std::string& text, double font_px = 12, bool bold = false);
double mono_width(const std::string& text, double font_px = 12);

enum class Anchor { Start, Middle, End };

// A picture built element by element. Every text says where it is anchored,
// so the canvas knows how far right it reaches; the document is as wide as
// its furthest element plus a margin, never narrower than asked.
class SvgCanvas {
 public:
  // `attrs`: extra attributes, e.g. fill="#555555"; `font_px` and `bold`
  // size the text (and are written when not 12 px regular); `mono` for
  // DejaVu Sans Mono with spaces kept.
  void text(double x, double y, const std::string& s, Anchor a = Anchor::Start, double font_px = 12,
            const std::string& attrs = "", bool bold = false, bool mono = false);
  // Any other element, escaped and with its own line break where one is wanted,
  // and the rightmost x it covers.
  void element(const std::string& svg, double right);
  double right() const { return right_; }
  // The document: a white background, the title in bold 16 px at the top.
  std::string document(const std::string& title, double min_width, double height) const;

 private:
  std::string body_;
  double right_ = 0;
};

}  // namespace ff
