#pragma once
// The linear algebra the fits share: small dense systems, solved exactly.
#include <vector>

namespace ff {

// Solves A·x = b in place of b for a small dense symmetric positive definite
// A (row-major, Cholesky); false where A is not (a squared pivot at or
// below `min_pivot`).
bool solve_spd(std::vector<double> a, std::vector<double>& b, double min_pivot = 0);

// Least squares of rows·x ≈ 1: each row already divided by its measured
// value, so the residuals are relative errors. Columns are scaled to unit
// norm before the normal equations (a fit's columns, µs steps against GB
// transfers, differ by 20 orders of magnitude). False where the columns are
// dependent or a column is all zero.
bool relative_least_squares(const std::vector<std::vector<double>>& rows, std::vector<double>& x);

}  // namespace ff
