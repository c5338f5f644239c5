// The 4D grid and rank placement (MODEL.md §1 "Rank placement", §2 "Search").
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "advisor/core/grid.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::input_error_of;
using Groups = std::vector<std::vector<long long>>;

namespace {

// All 24 permutations of "xyzd", spelled as --order strings.
std::vector<std::string> all_order_strings() {
  std::string s = "dpxyz";  // sorted, so next_permutation visits every one
  std::vector<std::string> out;
  do out.push_back(s);
  while (std::next_permutation(s.begin(), s.end()));
  return out;
}

Coords xyzpd_coords(int x, int y, int z, int p, int d) { return Coords{x, y, z, p, d}; }
// One stage: the pipe coordinate is 0.
Coords xyzd_coords(int x, int y, int z, int d) { return xyzpd_coords(x, y, z, 0, d); }

}  // namespace

TEST_CASE("grid: rank_of and coords_of are inverse for every order") {
  Grid g{2, 3, 2, 2};
  g.p = 2;  // 48 ranks
  const auto orders = all_order_strings();
  REQUIRE(orders.size() == 120);
  for (const std::string& os : orders) {
    CAPTURE(os);
    Order o = parse_order(os);
    CHECK(o.str() == os);
    std::set<long long> seen;
    for (long long r = 0; r < g.total(); ++r) {
      Coords c = coords_of(g, o, r);
      for (Axis a : kAxes) {
        CHECK(c[int(a)] >= 0);
        CHECK(c[int(a)] < g.size(a));
      }
      CHECK(rank_of(g, o, c) == r);
      seen.insert(r);
    }
    // and the other way round: every coordinate tuple maps to a distinct rank
    std::set<long long> ranks;
    for (int x = 0; x < 2; ++x)
      for (int y = 0; y < 3; ++y)
        for (int z = 0; z < 2; ++z)
          for (int p = 0; p < 2; ++p)
            for (int d = 0; d < 2; ++d) {
              Coords c = xyzpd_coords(x, y, z, p, d);
              long long r = rank_of(g, o, c);
              CHECK(coords_of(g, o, r) == c);
              ranks.insert(r);
            }
    CHECK(ranks.size() == 48);
    CHECK(*ranks.rbegin() == 47);
  }
}

TEST_CASE("grid: xyzd is rank = ((d*G_z + z)*G_y + y)*G_x + x") {
  const Grid g{2, 3, 2, 2};
  const Order o = parse_order("xyzd");
  for (int x = 0; x < g.x; ++x)
    for (int y = 0; y < g.y; ++y)
      for (int z = 0; z < g.z; ++z)
        for (int d = 0; d < g.d; ++d) {
          long long expected = ((1LL * d * g.z + z) * g.y + y) * g.x + x;
          CHECK(rank_of(g, o, xyzd_coords(x, y, z, d)) == expected);
        }
  // Two spelled out: (1,0,1,0) → ((0·2+1)·3+0)·2+1 = 7; (1,2,1,1) → ((1·2+1)·3+2)·2+1 = 23.
  CHECK(rank_of(g, o, xyzd_coords(1, 0, 1, 0)) == 7);
  CHECK(rank_of(g, o, xyzd_coords(1, 2, 1, 1)) == 23);
  CHECK(Order{} == o);  // xyzd is the default
}

TEST_CASE("grid: axis_stride is the product of the sizes placed inside the axis") {
  const Grid g{2, 3, 2, 2};
  const Order xyzd = parse_order("xyzd"), zdyx = parse_order("zdyx");
  CHECK(axis_stride(g, xyzd, Axis::X) == 1);
  CHECK(axis_stride(g, xyzd, Axis::Y) == 2);       // G_x
  CHECK(axis_stride(g, xyzd, Axis::Z) == 2 * 3);   // G_x·G_y
  CHECK(axis_stride(g, xyzd, Axis::D) == 2 * 3 * 2);
  CHECK(axis_stride(g, zdyx, Axis::Z) == 1);
  CHECK(axis_stride(g, zdyx, Axis::D) == 2);       // G_z
  CHECK(axis_stride(g, zdyx, Axis::Y) == 2 * 2);   // G_z·G_d
  CHECK(axis_stride(g, zdyx, Axis::X) == 2 * 2 * 3);
}

TEST_CASE("grid: groups of a 2,3,2,2 grid in xyzd order, by hand") {
  const Grid g{2, 3, 2, 2};
  const Order o = parse_order("xyzd");
  // X: stride 1, size 2.
  CHECK(groups_of(g, o, Axis::X) == Groups{{0, 1},   {2, 3},   {4, 5},   {6, 7},   {8, 9},   {10, 11},
                                           {12, 13}, {14, 15}, {16, 17}, {18, 19}, {20, 21}, {22, 23}});
  // Y: stride 2, size 3, in blocks of 6.
  CHECK(groups_of(g, o, Axis::Y) ==
        Groups{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}, {12, 14, 16}, {13, 15, 17}, {18, 20, 22}, {19, 21, 23}});
  // Z: stride 6, size 2, in blocks of 12.
  CHECK(groups_of(g, o, Axis::Z) == Groups{{0, 6},   {1, 7},   {2, 8},   {3, 9},   {4, 10},  {5, 11},
                                           {12, 18}, {13, 19}, {14, 20}, {15, 21}, {16, 22}, {17, 23}});
  // D: stride 12, size 2.
  CHECK(groups_of(g, o, Axis::D) == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}, {4, 16},  {5, 17},
                                           {6, 18}, {7, 19}, {8, 20}, {9, 21}, {10, 22}, {11, 23}});
  // One rank's groups: 9 = (x=1, y=1, z=1, d=0).
  CHECK(group_of(g, o, Axis::X, 9) == std::vector<long long>{8, 9});
  CHECK(group_of(g, o, Axis::Y, 9) == std::vector<long long>{7, 9, 11});
  CHECK(group_of(g, o, Axis::Z, 9) == std::vector<long long>{3, 9});
  CHECK(group_of(g, o, Axis::D, 9) == std::vector<long long>{9, 21});
}

TEST_CASE("grid: groups of a 2,3,2,2 grid in zdyx order, by hand") {
  // zdyx: rank = ((x·G_y + y)·G_d + d)·G_z + z = ((x·3 + y)·2 + d)·2 + z.
  const Grid g{2, 3, 2, 2};
  const Order o = parse_order("zdyx");
  CHECK(rank_of(g, o, xyzd_coords(1, 2, 1, 1)) == ((1 * 3 + 2) * 2 + 1) * 2 + 1);  // 23
  CHECK(rank_of(g, o, xyzd_coords(0, 2, 1, 0)) == ((0 * 3 + 2) * 2 + 0) * 2 + 1);  // 9
  CHECK(coords_of(g, o, 17) == xyzd_coords(1, 1, 1, 0));  // 17 = 12 + 4 + 1
  // Z: stride 1, size 2.
  CHECK(groups_of(g, o, Axis::Z) == Groups{{0, 1},   {2, 3},   {4, 5},   {6, 7},   {8, 9},   {10, 11},
                                           {12, 13}, {14, 15}, {16, 17}, {18, 19}, {20, 21}, {22, 23}});
  // D: stride 2, size 2, in blocks of 4.
  CHECK(groups_of(g, o, Axis::D) == Groups{{0, 2},   {1, 3},   {4, 6},   {5, 7},   {8, 10},  {9, 11},
                                           {12, 14}, {13, 15}, {16, 18}, {17, 19}, {20, 22}, {21, 23}});
  // Y: stride 4, size 3, in blocks of 12.
  CHECK(groups_of(g, o, Axis::Y) == Groups{{0, 4, 8},
                                           {1, 5, 9},
                                           {2, 6, 10},
                                           {3, 7, 11},
                                           {12, 16, 20},
                                           {13, 17, 21},
                                           {14, 18, 22},
                                           {15, 19, 23}});
  // X: stride 12, size 2.
  CHECK(groups_of(g, o, Axis::X) == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}, {4, 16},  {5, 17},
                                           {6, 18}, {7, 19}, {8, 20}, {9, 21}, {10, 22}, {11, 23}});
  CHECK(group_of(g, o, Axis::Y, 9) == std::vector<long long>{1, 5, 9});
  CHECK(group_of(g, o, Axis::X, 17) == std::vector<long long>{5, 17});
}

TEST_CASE("grid: distinct_orders counts placements, not spellings") {
  CHECK(distinct_orders(Grid{2, 3, 2, 2}).size() == 24);  // 4! when every axis is > 1
  CHECK(distinct_orders(Grid{2, 3, 1, 2}).size() == 6);   // 3! when one axis is 1
  CHECK(distinct_orders(Grid{4, 1, 1, 2}).size() == 2);   // 2! when two are
  CHECK(distinct_orders(Grid{8, 1, 1, 1}).size() == 1);
  CHECK(distinct_orders(Grid{1, 1, 1, 1}).size() == 1);
  CHECK(distinct_orders(Grid{2, 3, 2, 2}).front() == parse_order("xyzd"));  // xyzd's placement first

  // The 6 orders of 2,3,1,2 are 6 different rank maps.
  const Grid g{2, 3, 1, 2};
  std::set<std::vector<long long>> maps;
  for (const Order& o : distinct_orders(g)) {
    std::vector<long long> m;
    for (int x = 0; x < 2; ++x)
      for (int y = 0; y < 3; ++y)
        for (int d = 0; d < 2; ++d) m.push_back(rank_of(g, o, xyzd_coords(x, y, 0, d)));
    maps.insert(m);
  }
  CHECK(maps.size() == 6);

  // Where the size-1 axis sits changes nothing: yzxd and yxzd are one placement.
  Order a = parse_order("yzxd"), b = parse_order("yxzd");
  for (Axis ax : kAxes) CHECK(groups_of(g, a, ax) == groups_of(g, b, ax));
  Order ca = canonical_order(g, a);
  CHECK(ca == canonical_order(g, b));
  for (Axis ax : kAxes) CHECK(groups_of(g, ca, ax) == groups_of(g, a, ax));
  auto d = distinct_orders(g);
  CHECK(std::find(d.begin(), d.end(), ca) != d.end());
}

TEST_CASE("grid: factorizations count ordered 4-factorizations") {
  // n = Π p^e has Π C(e+3, 3) ordered factorizations into 4 factors.
  CHECK(factorizations(1).size() == 1);
  CHECK(factorizations(1024).size() == 286);   // 2^10: C(13,3) = 286
  CHECK(factorizations(6144).size() == 1456);  // 2^11·3: C(14,3)·C(4,3) = 364·4
  CHECK(factorizations(12).size() == 40);      // 2^2·3: C(5,3)·C(4,3) = 10·4
  CHECK(factorizations(7).size() == 4);        // a prime: it sits on one of the 4 axes

  for (long long n : {12LL, 6144LL}) {
    std::set<std::string> distinct;
    for (const Grid& g : factorizations(n)) {
      CHECK(g.total() == n);
      distinct.insert(g.str());
    }
    CHECK(distinct.size() == factorizations(n).size());
  }
  CHECK(factorizations(1).front() == Grid{1, 1, 1, 1});
  // x slowest, then y, then z, each ascending; data takes the rest. The
  // search's tie-breaks follow this order.
  std::vector<Grid> f12 = factorizations(12);
  REQUIRE(f12.size() >= 7);
  CHECK(f12[0] == Grid{1, 1, 1, 12});
  CHECK(f12[1] == Grid{1, 1, 2, 6});
  CHECK(f12[2] == Grid{1, 1, 3, 4});
  CHECK(f12[5] == Grid{1, 1, 12, 1});
  CHECK(f12[6] == Grid{1, 2, 1, 6});
  CHECK(f12.back() == Grid{12, 1, 1, 1});
}

TEST_CASE("grid: the per-axis accessor reaches the named fields") {
  Grid g{4, 2, 16, 8};
  CHECK(g[Axis::X] == 4);
  CHECK(g[Axis::Y] == 2);
  CHECK(g[Axis::Z] == 16);
  CHECK(g[Axis::D] == 8);
  g[Axis::Z] = 3;
  CHECK(g.z == 3);
  CHECK(g.total() == 4 * 2 * 3 * 8);
  CHECK(std::string(axis_name(Axis::D)) == "data");
  CHECK(axis_letter(Axis::D) == 'd');
  CHECK(std::string(axis_name(Axis::P)) == "pipe");
  CHECK(axis_letters(",") == "x,y,z,p,d");
  CHECK(axis_letters(",", true) == "X,Y,Z,P,D");
  CHECK(Order().str() == "xyzpd");
  CHECK(g.p == 1);  // brace-initialised grids of four keep one stage
  g.p = 3;
  CHECK(g.total() == 4 * 2 * 3 * 3 * 8);
  CHECK(g.str() == "4,2,3,8");
  CHECK(g.label() == "4,2,3,8 p3");
}

TEST_CASE("grid: parse_grid and parse_order") {
  CHECK(parse_grid("4,2,16,8") == Grid{4, 2, 16, 8});
  CHECK(parse_grid("1,1,1,1").total() == 1);
  CHECK(Grid{4, 2, 16, 8}.str() == "4,2,16,8");
  // Four letters get p immediately inside d (AxoNN's layout); five place it anywhere.
  CHECK(parse_order("dzyx").axes == PerAxis<Axis>{Axis::P, Axis::D, Axis::Z, Axis::Y, Axis::X});
  CHECK(parse_order("xyzd").str() == "xyzpd");
  CHECK(parse_order("dxyz").str() == "pdxyz");
  CHECK(parse_order("pxyzd").str() == "pxyzd");

  CHECK(parse_grid("4,2,16,3,8") == Grid{4, 2, 16, 8, 3});  // five: X,Y,Z,P,D
  for (const char* bad : {"", "4,2,16", "4,2,16,8,1,1", "4,0,1,1", "-1,1,1,1", "a,1,1,1", "4.5,1,1,1", "4,,1,1",
                          "4;2;16;8", "4,2,16,8x"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_grid(bad), InputError);
  }
  CHECK(fftest::contains(input_error_of([] { parse_grid("4,2,16"); }), "4,2,16"));
  CHECK(input_error_of([] { parse_grid("4,2,16"); }) ==
        "'4,2,16': expected four sizes X,Y,Z,D, e.g. 4,2,16,8 (stages from --pipeline P), or five X,Y,Z,P,D");
  CHECK(input_error_of([] { parse_grid("4,a,1,1"); }) ==
        "'4,a,1,1': 'a' is not a positive integer (expected X,Y,Z,D, e.g. 4,2,16,8)");
  CHECK(input_error_of([] { parse_order("xyz"); }) ==
        "'xyz': expected a permutation of the letters x, y, z, p, d (innermost first, e.g. xyzpd; four letters "
        "without p place it just inside d)");
  for (const char* bad : {"", "xyz", "xyzz", "xyzdd", "abcd", "XYZD", "x y z d", "xyzp", "xyzpdd", "pxyz"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_order(bad), InputError);
  }
}

// "4,2,16,8," is not X,Y,Z,D: std::getline drops the empty last field, so it
// parses as 4,2,16,8. Input is silently accepted that the message says is wrong.
TEST_CASE("grid: parse_grid rejects a trailing comma") {
  CHECK_THROWS_AS(parse_grid("4,2,16,8,"), InputError);
  CHECK_THROWS_AS(parse_grid("4,2,16,2,8,"), InputError);
}
