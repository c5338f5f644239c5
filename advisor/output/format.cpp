#include "advisor/output/format.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "advisor/core/error.hpp"

namespace ff::advisor {

Table::Table(std::vector<std::string> headers) {
  for (auto& h : headers) {
    bool left = !h.empty() && h[0] == '<';
    left_.push_back(left);
    headers_.push_back(left ? h.substr(1) : h);
  }
}

void Table::row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

namespace {
// Display width: count UTF-8 code points, not bytes.
size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}
}  // namespace

std::string Table::str(const std::string& indent) const {
  std::vector<size_t> w(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) w[i] = width(headers_[i]);
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = indent;
    for (size_t i = 0; i < w.size(); ++i) {
      std::string c = i < cells.size() ? cells[i] : "";
      std::string pad(w[i] - width(c), ' ');
      l += left_[i] ? c + pad : pad + c;
      if (i + 1 < w.size()) l += "  ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string seconds(double s) {
  if (s >= 100) return fixed(s, 0) + " s";
  if (s >= 1) return fixed(s, 2) + " s";
  if (s >= 1e-3) return fixed(s * 1e3, s >= 0.1 ? 0 : 1) + " ms";
  return fixed(s * 1e6, 1) + " µs";
}

std::string gib(double bytes) { return fixed(bytes / 1073741824.0, 1); }

std::string grouped(long long n) {
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 6) v /= 1000, ++i;
  return fixed(v, v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + prefixes[i] + unit;
}

std::string bytes_h(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  return fixed(b, i == 0 ? 0 : 1) + " " + units[i];
}

}  // namespace ff::advisor
