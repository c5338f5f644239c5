#pragma once
// The terminal and file edges of the CLI: aligned tables, numbers for
// people, files written atomically.
#include <string>
#include <vector>

namespace ff::advisor {

// Columns are right-aligned unless their header starts with '<'
// (the '<' is not printed).
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void row(std::vector<std::string> cells);
  std::string str(const std::string& indent = "") const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

std::string fixed(double v, int decimals);
std::string seconds(double s);       // "12.86 s", "340 ms", "25 µs"
std::string gib(double bytes);       // "25.6"
std::string grouped(long long n);    // "1,234,567"
std::string si(double v, const char* unit);  // "1.23 M" + unit
std::string bytes_h(double b);       // "12.0 MiB"

}  // namespace ff::advisor
