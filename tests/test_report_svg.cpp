// The breakdown picture (`recommend --plot`, output/report_svg.hpp): each
// bar's segments as wide as their seconds on one scale, in the stacking
// order, side by side; the time axis on round ticks; what a part lacks, or
// cannot be drawn, left out. Expected widths are worked by hand: the longest
// bar here is 4 s, so the ticks are every 0.5 s (the first of 1, 2, 5 × 10^k
// giving at most 8 intervals), the axis ends at 4 s, and 560 px of plot make
// 140 px a second.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "advisor/output/report_svg.hpp"

using namespace ff;

namespace {

struct Segment {
  double x, y, width;
  std::string fill, part;
  double seconds;
};

std::vector<Segment> segments(const std::string& svg) {
  static const std::regex rect(
      "<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"[0-9.]+\" fill=\"(#[0-9a-f]{6})\"[^>]*>"
      "<title>([a-z ]+): ([0-9.]+) s</title></rect>");
  std::vector<Segment> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back({std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), m[4], m[5], std::stod(m[6])});
  }
  return out;
}

BreakdownBar bar(const std::string& label, double compute, PerAxis<double> exposed, double idle, double host,
                 double gib) {
  BreakdownBar b;
  b.label = label;
  b.compute_s = compute;
  b.exposed_s = exposed;
  b.idle_s = idle;
  b.host_s = host;
  b.memory_gib = gib;
  return b;
}

}  // namespace

TEST_CASE("breakdown bars: segments to scale, in order, contiguous; parts that are zero or not finite left out") {
  //                         x    y    z    pipe  data
  const std::vector<BreakdownBar> bars = {
      bar("#1 first", 2.0, {0.5, 0.0, 1.0, 0.0, 0.5}, 0.0, 0.0, 12.34),
      bar("#2 second", 1.0, {-0.2, NAN, 0.0, 0.0, 0.0}, 0.25, 0.5, 3.0),
  };
  const std::string svg = breakdown_svg(bars, "a<b & c");
  const std::vector<Segment> s = segments(svg);

  // Bar 1: compute 280 px, x 70, z 140, data 70; bar 2: compute 140, pipeline
  // idle 35, host link 70. Nothing else.
  struct Want {
    const char* part;
    double width;
  };
  const std::vector<Want> want = {{"compute", 280}, {"x", 70},         {"z", 140},       {"data", 70},
                                  {"compute", 140}, {"pipeline idle", 35}, {"host link", 70}};
  REQUIRE(s.size() == want.size());
  // Each segment in its legend swatch's colour.
  std::map<std::string, std::string> legend;
  static const std::regex swatch("<rect x=\"[0-9.]+\" y=\"40\" width=\"12\" height=\"12\" fill=\"(#[0-9a-f]{6})\"/>"
                                 "<text x=\"[0-9.]+\" y=\"50\">([a-z ]+)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), swatch); it != std::sregex_iterator(); ++it)
    legend[(*it)[2]] = (*it)[1];
  CHECK(legend.size() == 8);  // compute, x, y, z, pipe, data, pipeline idle, host link
  const double left = s[0].x;
  for (size_t i = 0; i < s.size(); ++i) {
    INFO("segment " << i << " (" << s[i].part << ")");
    CHECK(s[i].part == want[i].part);
    CHECK(s[i].width == doctest::Approx(want[i].width).epsilon(1e-4));
    CHECK(s[i].width == doctest::Approx(140 * s[i].seconds).epsilon(1e-4));
    CHECK(s[i].fill == legend[s[i].part]);
    const bool starts_bar = i == 0 || s[i].y != s[i - 1].y;
    if (starts_bar) CHECK(s[i].x == doctest::Approx(left));
    else CHECK(s[i].x == doctest::Approx(s[i - 1].x + s[i - 1].width).epsilon(1e-4));
  }
  CHECK(s[4].y == doctest::Approx(s[0].y + 32));  // one row further down

  // Totals and memory at each bar's end; the ticks 0.0 … 4.0 s, the first at
  // the bars' left edge; the title escaped.
  CHECK(svg.find(">4.00 s \u00b7 12.3 GiB</text>") != std::string::npos);
  CHECK(svg.find(">1.75 s \u00b7 3.0 GiB</text>") != std::string::npos);
  for (int i = 0; i <= 8; ++i) {
    char tick[32];
    std::snprintf(tick, sizeof tick, "text-anchor=\"middle\">%.1f</text>", 0.5 * i);
    CHECK_MESSAGE(svg.find(tick) != std::string::npos, tick);
  }
  CHECK(svg.find("text-anchor=\"middle\">4.5</text>") == std::string::npos);
  char first_line[64];
  std::snprintf(first_line, sizeof first_line, "<line x1=\"%.1f\"", left);
  CHECK(svg.find(first_line) != std::string::npos);
  CHECK(svg.find(">a&lt;b &amp; c</text>") != std::string::npos);
}

TEST_CASE("breakdown bars: no configurations is a picture that says so") {
  const std::string svg = breakdown_svg({}, "nothing fits");
  CHECK(svg.find("no configurations") != std::string::npos);
  CHECK(segments(svg).empty());
}

TEST_CASE("breakdown bars: the picture is as wide as its legend, so no text is cut at the right edge") {
  // Short labels and bars leave the legend the widest line. Its note, 32
  // glyphs of DejaVu Sans at 12 px, renders 208 px wide (rsvg-convert,
  // measured off the picture); the width must reach past it.
  const std::string svg = breakdown_svg({bar("#1", 1, {}, 0, 0, 1)}, "t");
  std::smatch w, note;
  REQUIRE(std::regex_search(svg, w, std::regex("<svg[^>]* width=\"([0-9.]+)\"")));
  REQUIRE(std::regex_search(svg, note, std::regex("<text x=\"([0-9.]+)\"[^>]*>\\(exposed communication per axis\\)")));
  CHECK(std::stod(w[1]) >= std::stod(note[1]) + 208);
}
