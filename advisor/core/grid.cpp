#include "advisor/core/grid.hpp"

#include <algorithm>
#include <sstream>

#include "advisor/core/error.hpp"

namespace ff {

namespace {

// "xyzpd": the letters in axis order, which is also the default order's spelling.
std::string letters() { return axis_letters(""); }

}  // namespace

std::string axis_letters(const std::string& sep, bool upper) {
  std::string s;
  for (Axis a : kAxes) {
    if (!s.empty()) s += sep;
    s += upper ? char(axis_letter(a) - 'a' + 'A') : axis_letter(a);
  }
  return s;
}

std::string Grid::str() const {
  std::string s;
  for (Axis a : kGridFlagAxes) {
    if (!s.empty()) s += ',';  // appended, not "," + ...: GCC 12 misreads that (-Wrestrict)
    s += std::to_string(size(a));
  }
  return s;
}

std::string Grid::label() const {
  std::string s = str();
  if (p > 1) {
    s += " p";
    s += std::to_string(p);
  }
  return s;
}

std::string Order::str() const {
  std::string s;
  for (Axis a : axes) s += axis_letter(a);
  return s;
}

Grid parse_grid(const std::string& text) {
  static constexpr const char* kExample = "4,2,16,8";  // a size per axis, innermost first
  std::string sizes, with_p;
  for (Axis a : kGridFlagAxes) {
    const std::string l(1, char(axis_letter(a) - 'a' + 'A'));
    sizes += (sizes.empty() ? "" : ",") + l;
    with_p += (with_p.empty() ? "" : ",") + std::string(a == Axis::D ? "P," : "") + l;
  }
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
      input_error("'" + text + "': '" + part + "' is not a positive integer (expected " + sizes + ", e.g. " +
                  kExample + ")");
    v.push_back(n);
  }
  constexpr size_t n = std::size(kGridFlagAxes);
  if ((v.size() != n && v.size() != n + 1) || text.empty() || text.back() == ',')
    input_error("'" + text + "': expected four sizes " + sizes + ", e.g. " + kExample +
                " (stages from --pipeline P), or five " + with_p);
  Grid g;
  // Five numbers are the xyzpd order: P before D.
  const bool staged = v.size() == n + 1;
  for (size_t i = 0, j = 0; i < n; ++i, ++j) {
    if (staged && kGridFlagAxes[i] == Axis::D) g.p = int(v[j++]);
    g[kGridFlagAxes[i]] = int(v[j]);
  }
  return g;
}

Order parse_order(const std::string& text) {
  Order o;
  const std::string all = letters();
  std::string spelled = text;
  // Four letters (written before stages existed): p goes immediately inside d.
  const char p = axis_letter(Axis::P), d = axis_letter(Axis::D);
  if (spelled.size() + 1 == all.size() && spelled.find(p) == std::string::npos && spelled.find(d) != std::string::npos)
    spelled.insert(spelled.find(d), 1, p);
  std::string sorted = spelled, want = all;
  std::sort(sorted.begin(), sorted.end());
  std::sort(want.begin(), want.end());
  if (sorted != want)
    input_error("'" + text + "': expected a permutation of the letters " + axis_letters(", ") +
                " (innermost first, e.g. " + all + "; four letters without " + p + " place it just inside " + d + ")");
  for (int i = 0; i < kAxisCount; ++i) o.axes[i] = static_cast<Axis>(all.find(spelled[i]));
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
  for (int i = kAxisCount - 1; i >= 0; --i) {
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
  PerAxis<Axis> perm = kAxes;  // sorted: xyzd first
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
  // Axis by axis in order, each size ascending; the last axis takes the rest.
  constexpr int n_axes = int(std::size(kGridFlagAxes));
  Grid g;
  auto place = [&](auto& self, int i, long long rest) -> void {
    if (i == n_axes - 1) {
      g[kGridFlagAxes[i]] = int(rest);
      out.push_back(g);
      return;
    }
    for (long long v : divs) {
      if (v > rest) break;
      if (rest % v != 0) continue;
      g[kGridFlagAxes[i]] = int(v);
      self(self, i + 1, rest / v);
    }
  };
  place(place, 0, n);
  return out;
}

}  // namespace ff
