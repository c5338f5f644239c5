#include "advisor/calibration/least_squares.hpp"

#include <cmath>

namespace ff {

bool solve_spd(std::vector<double> a, std::vector<double>& b, double min_pivot) {
  const size_t d = b.size();
  for (size_t j = 0; j < d; ++j) {
    double s = a[j * d + j];
    for (size_t k = 0; k < j; ++k) s -= a[j * d + k] * a[j * d + k];
    if (!(s > min_pivot)) return false;
    a[j * d + j] = std::sqrt(s);
    for (size_t i = j + 1; i < d; ++i) {
      double t = a[i * d + j];
      for (size_t k = 0; k < j; ++k) t -= a[i * d + k] * a[j * d + k];
      a[i * d + j] = t / a[j * d + j];
    }
  }
  for (size_t i = 0; i < d; ++i) {
    for (size_t k = 0; k < i; ++k) b[i] -= a[i * d + k] * b[k];
    b[i] /= a[i * d + i];
  }
  for (size_t i = d; i-- > 0;) {
    for (size_t k = i + 1; k < d; ++k) b[i] -= a[k * d + i] * b[k];
    b[i] /= a[i * d + i];
  }
  return true;
}

bool relative_least_squares(const std::vector<std::vector<double>>& rows, std::vector<double>& x) {
  if (rows.empty()) return false;
  const size_t d = rows[0].size();
  std::vector<double> scale(d, 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < d; ++c) scale[c] += r[c] * r[c];
  for (double& s : scale) {
    if (!(s > 0)) return false;
    s = std::sqrt(s);
  }
  std::vector<double> a(d * d, 0);
  x.assign(d, 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < d; ++i) {
      x[i] += r[i] / scale[i];
      for (size_t j = 0; j < d; ++j) a[i * d + j] += r[i] / scale[i] * r[j] / scale[j];
    }
  if (!solve_spd(a, x, 1e-12)) return false;  // unit diagonal: a pivot below this is dependence
  for (size_t i = 0; i < d; ++i) x[i] /= scale[i];
  return true;
}

}  // namespace ff
