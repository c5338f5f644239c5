#include "grid.hpp"

#include <algorithm>
#include <sstream>

#include "error.hpp"

namespace ff {

const char* axis_name(Axis a) {
  static const char* names[] = {"x", "y", "z", "data"};
  return names[static_cast<int>(a)];
}

char axis_letter(Axis a) { return "xyzd"[static_cast<int>(a)]; }

std::string Grid::str() const {
  return std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + "," + std::to_string(d);
}

std::string Order::str() const {
  std::string s;
  for (Axis a : axes) s += axis_letter(a);
  return s;
}

Grid parse_grid(const std::string& text) {
  std::vector<long long> v;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != part.size() || n < 1 || n > (1LL << 30))
      input_error("--grid '" + text + "': '" + part + "' is not a positive integer (expected X,Y,Z,D, e.g. 4,2,16,8)");
    v.push_back(n);
  }
  if (v.size() != 4 || text.empty() || text.back() == ',') input_error("--grid '" + text + "': expected four sizes X,Y,Z,D, e.g. 4,2,16,8");
  return Grid{int(v[0]), int(v[1]), int(v[2]), int(v[3])};
}

Order parse_order(const std::string& text) {
  Order o;
  std::string sorted = text;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != "dxyz")
    input_error("--order '" + text + "': expected a permutation of the letters x, y, z, d (innermost first, e.g. xyzd)");
  for (int i = 0; i < 4; ++i) o.axes[i] = static_cast<Axis>(std::string("xyzd").find(text[i]));
  return o;
}

long long axis_stride(const Grid& g, const Order& o, Axis a) {
  long long s = 1;
  for (Axis b : o.axes) {
    if (b == a) return s;
    s *= g.size(b);
  }
  return s;
}

long long rank_of(const Grid& g, const Order& o, const Coords& c) {
  long long r = 0;
  for (int i = 3; i >= 0; --i) {
    Axis a = o.axes[i];
    r = r * g.size(a) + c[static_cast<int>(a)];
  }
  return r;
}

Coords coords_of(const Grid& g, const Order& o, long long rank) {
  Coords c{};
  for (Axis a : o.axes) {
    c[static_cast<int>(a)] = static_cast<int>(rank % g.size(a));
    rank /= g.size(a);
  }
  return c;
}

std::vector<long long> group_of(const Grid& g, const Order& o, Axis a, long long rank) {
  Coords c = coords_of(g, o, rank);
  std::vector<long long> ranks;
  for (int i = 0; i < g.size(a); ++i) {
    c[static_cast<int>(a)] = i;
    ranks.push_back(rank_of(g, o, c));
  }
  return ranks;
}

std::vector<std::vector<long long>> groups_of(const Grid& g, const Order& o, Axis a) {
  std::vector<std::vector<long long>> groups;
  for (long long r = 0; r < g.total(); ++r)
    if (coords_of(g, o, r)[static_cast<int>(a)] == 0) groups.push_back(group_of(g, o, a, r));
  return groups;
}

namespace {
std::string placement_key(const Grid& g, const Order& o) {
  std::string key;
  for (Axis a : o.axes)
    if (g.size(a) > 1) key += axis_letter(a);
  return key;
}
}  // namespace

std::vector<Order> distinct_orders(const Grid& g) {
  std::vector<Order> out;
  std::vector<std::string> seen;
  std::array<Axis, 4> perm = {Axis::X, Axis::Y, Axis::Z, Axis::D};  // sorted: xyzd first
  do {
    Order o{perm};
    std::string key = placement_key(g, o);
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
      seen.push_back(key);
      out.push_back(o);
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return out;
}

Order canonical_order(const Grid& g, const Order& o) {
  std::string key = placement_key(g, o);
  for (const Order& c : distinct_orders(g))
    if (placement_key(g, c) == key) return c;
  return o;
}

std::vector<Grid> factorizations(long long n) {
  std::vector<Grid> out;
  if (n < 1) return out;
  std::vector<long long> divs;
  for (long long i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      divs.push_back(i);
      if (i != n / i) divs.push_back(n / i);
    }
  std::sort(divs.begin(), divs.end());
  for (long long x : divs)
    for (long long y : divs) {
      if ((n / x) % y != 0) continue;
      long long rest = n / x / y;
      for (long long z : divs) {
        if (z > rest) break;
        if (rest % z == 0) out.push_back(Grid{int(x), int(y), int(z), int(rest / z)});
      }
    }
  return out;
}

}  // namespace ff
