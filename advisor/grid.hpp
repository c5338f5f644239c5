#pragma once
// The 4D grid and rank placement: which ranks form a group on each axis, and
// which node holds them. The same arithmetic serves the advisor, measure/ and
// engine/, so a geometry means one thing everywhere.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ff {

enum class Axis : uint8_t { X = 0, Y = 1, Z = 2, D = 3 };
inline constexpr std::array<Axis, 4> kAxes = {Axis::X, Axis::Y, Axis::Z, Axis::D};
const char* axis_name(Axis a);  // "x", "y", "z", "data"
char axis_letter(Axis a);       // 'x', 'y', 'z', 'd'

struct Grid {
  int x = 1, y = 1, z = 1, d = 1;
  int size(Axis a) const { return std::array<int, 4>{x, y, z, d}[static_cast<int>(a)]; }
  long long total() const { return 1LL * x * y * z * d; }
  std::string str() const;  // "4,2,16,8"
  bool operator==(const Grid&) const = default;
};

// Four axes, innermost (fastest-varying rank) first: "xyzd" is
// rank = ((d·G_z + z)·G_y + y)·G_x + x.
struct Order {
  std::array<Axis, 4> axes = {Axis::X, Axis::Y, Axis::Z, Axis::D};
  std::string str() const;
  bool operator==(const Order&) const = default;
};

Grid parse_grid(const std::string& text);    // "X,Y,Z,D"; throws InputError
Order parse_order(const std::string& text);  // a permutation of "xyzd"; throws InputError

// Rank distance between neighbours on `a`: the product of the sizes of the
// axes placed inside it.
long long axis_stride(const Grid& g, const Order& o, Axis a);

using Coords = std::array<int, 4>;  // indexed by Axis
long long rank_of(const Grid& g, const Order& o, const Coords& c);
Coords coords_of(const Grid& g, const Order& o, long long rank);

// The ranks of `rank`'s group on axis `a`, in axis-coordinate order.
std::vector<long long> group_of(const Grid& g, const Order& o, Axis a, long long rank);
// Every group on axis `a`, each in axis-coordinate order, ordered by first rank.
std::vector<std::vector<long long>> groups_of(const Grid& g, const Order& o, Axis a);

// Orders that differ only in where size-1 axes sit are one placement: one
// representative each, "xyzd"'s first.
std::vector<Order> distinct_orders(const Grid& g);
// Canonical representative of o's placement (the first of distinct_orders).
Order canonical_order(const Grid& g, const Order& o);

// Every ordered factorization of n into four positive factors (x, y, z, d).
std::vector<Grid> factorizations(long long n);

}  // namespace ff
