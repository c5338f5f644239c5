#pragma once
// The grid (axes x, y, z, pipe, data) and rank placement: which ranks form a group
// on each axis, and which node holds them. The same arithmetic serves the
// advisor, measure/ and engine/, so a geometry means one thing everywhere.
#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

namespace ff {

// A new axis is one enumerator, one row of kAxisSpelling, one field of Grid
// and its entry in kGridFields; everything per axis loops over kAxes.
// P is the pipeline-stage axis (MODEL.md §9), between the tensor axes and data
// as AxoNN places it.
enum class Axis : uint8_t { X, Y, Z, P, D };

struct AxisSpelling {
  const char* name;  // records' JSON keys, tables, messages
  char letter;       // --order
};
inline constexpr AxisSpelling kAxisSpelling[] = {{"x", 'x'}, {"y", 'y'}, {"z", 'z'}, {"pipe", 'p'}, {"data", 'd'}};
inline constexpr int kAxisCount = int(std::size(kAxisSpelling));
static_assert(int(Axis::D) == kAxisCount - 1, "one spelling per Axis enumerator");

// A value per axis, indexed by the axis' enumerator.
template <class T>
using PerAxis = std::array<T, kAxisCount>;

inline constexpr PerAxis<Axis> kAxes = [] {
  PerAxis<Axis> a{};
  for (int i = 0; i < kAxisCount; ++i) a[i] = static_cast<Axis>(i);
  return a;
}();

constexpr const char* axis_name(Axis a) { return kAxisSpelling[static_cast<int>(a)].name; }
constexpr char axis_letter(Axis a) { return kAxisSpelling[static_cast<int>(a)].letter; }
// The axes `--grid X,Y,Z,D` spells; P comes from `--pipeline`, so a grid
// written before stages existed keeps its meaning (five numbers, X,Y,Z,P,D,
// spell it too).
inline constexpr Axis kGridFlagAxes[] = {Axis::X, Axis::Y, Axis::Z, Axis::D};
// The letters in axis order joined by `sep`: "x,y,z,p,d"; upper: "X,Y,Z,P,D".
std::string axis_letters(const std::string& sep, bool upper = false);

// Named fields because records and people name them; generic code reaches
// them through operator[] (kGridFields). A new field goes last whatever its
// axis' place: kGridFields sets the axis order, and the brace-initialised
// grids written so far (Grid{4, 2, 16, 8}) keep their meaning, the new size 1.
struct Grid {
  int x = 1, y = 1, z = 1, d = 1, p = 1;
  int& operator[](Axis a);
  int operator[](Axis a) const;
  int size(Axis a) const { return (*this)[a]; }
  long long total() const;
  std::string str() const;    // --grid's "4,2,16,8": X,Y,Z,D without P
  std::string label() const;  // for people: str(), then " p2" where there are stages
  bool operator==(const Grid&) const = default;
};
inline constexpr PerAxis<int Grid::*> kGridFields = {&Grid::x, &Grid::y, &Grid::z, &Grid::p, &Grid::d};
static_assert([] {
  for (int i = 0; i < kAxisCount; ++i)
    for (int j = 0; j < i; ++j)
      if (!kGridFields[i] || kGridFields[i] == kGridFields[j]) return false;
  return kGridFields[0] != nullptr;
}(), "a Grid field of its own for every axis");
inline int& Grid::operator[](Axis a) { return this->*kGridFields[static_cast<int>(a)]; }
inline int Grid::operator[](Axis a) const { return this->*kGridFields[static_cast<int>(a)]; }
inline long long Grid::total() const {
  long long t = 1;
  for (Axis a : kAxes) t *= size(a);
  return t;
}

// Every axis, innermost (fastest-varying rank) first: "xyzpd" is
// rank = (((d·G_p + p)·G_z + z)·G_y + y)·G_x + x, AxoNN's layout.
struct Order {
  PerAxis<Axis> axes = kAxes;
  std::string str() const;
  bool operator==(const Order&) const = default;
};

// "X,Y,Z,D" (P = 1) or "X,Y,Z,P,D"; throws InputError with a message that
// names the value, not a flag (the CLI names the flag).
Grid parse_grid(const std::string& text);
// A permutation of "xyzpd", or of "xyzd" with p placed immediately before d
// ("dxyz" → "pdxyz"); throws InputError.
Order parse_order(const std::string& text);

// Rank distance between neighbours on `a`: the product of the sizes of the
// axes placed inside it.
long long axis_stride(const Grid& g, const Order& o, Axis a);

using Coords = PerAxis<int>;
long long rank_of(const Grid& g, const Order& o, const Coords& c);
Coords coords_of(const Grid& g, const Order& o, long long rank);

// The ranks of `rank`'s group on axis `a`, in axis-coordinate order.
std::vector<long long> group_of(const Grid& g, const Order& o, Axis a, long long rank);
// Every group on axis `a`, each in axis-coordinate order, ordered by first rank.
std::vector<std::vector<long long>> groups_of(const Grid& g, const Order& o, Axis a);

// Orders that differ only in where size-1 axes sit are one placement: one
// representative each, "xyzpd"'s first.
std::vector<Order> distinct_orders(const Grid& g);
// Canonical representative of o's placement (the first of distinct_orders).
Order canonical_order(const Grid& g, const Order& o);

// Every ordered factorization of n into one positive factor per axis of
// kGridFlagAxes (P = 1).
std::vector<Grid> factorizations(long long n);

}  // namespace ff
