// The communicator's collectives on bf16 (4 ranks over MPI, one axis of 4):
// values move as 2 bytes, bit for bit; sums and maxima are computed in float
// and rounded to nearest even, whatever order the ranks' values meet in.
// Every expectation is written out by hand. Also bf16::round against
// hand-made bit patterns (no MPI).
#include <doctest/doctest.h>
#include <mpi.h>

#include <bit>
#include <iterator>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/mpi_comm.hpp"
#include "engine/runtime/bf16.hpp"

using namespace ff;
using namespace ff::engine;

namespace {

bf16 of_bits(uint16_t b) {
  bf16 v;
  v.bits = b;
  return v;
}

std::vector<bf16> of_floats(const std::vector<float>& f) { return {f.begin(), f.end()}; }

std::string hex(uint32_t b) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%04X", unsigned(b));
  return s;
}

void check_bits(const std::vector<bf16>& got, const std::vector<uint16_t>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << hex(got[i].bits) << ", want " << hex(want[i]));
    CHECK(got[i].bits == want[i]);
  }
}

// The four ranks of the world on X, at coordinates 0..3 (rank r at r).
struct Line {
  std::unique_ptr<Device> dev = make_cpu_device();
  Grid grid = [] {
    Grid g;
    g.x = 4;
    return g;
  }();
  MpiComm comm{MPI_COMM_WORLD, grid, Order{}, *dev};
  int c = comm.coord(Axis::X);
};

}  // namespace

TEST_CASE("bf16::round: nearest even, infinities, NaN, the largest finite value") {
  CHECK(bf16::round(1.0f) == 0x3F80);
  CHECK(bf16::round(1.0f + 0x1p-7f) == 0x3F81);      // one ulp above 1
  CHECK(bf16::round(1.0f + 0x1p-8f) == 0x3F80);      // half an ulp: a tie, to the even 0x3F80
  CHECK(bf16::round(1.0f + 3 * 0x1p-8f) == 0x3F82);  // 1.5 ulp: a tie, up to the even 0x3F82
  CHECK(bf16::round(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);  // just past the tie
  CHECK(bf16::round(-2.0f) == 0xC000);
  CHECK(bf16::round(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(bf16::round(-std::numeric_limits<float>::infinity()) == 0xFF80);
  // A NaN whose payload lies only in the 16 bits dropped would truncate to
  // infinity; it must stay a NaN (exponent all ones, mantissa not zero).
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u}) {
    const uint16_t b = bf16::round(std::bit_cast<float>(nan));
    INFO("NaN " << hex(nan) << " -> " << hex(b));
    CHECK((b & 0x7F80) == 0x7F80);
    CHECK((b & 0x007F) != 0);
  }
  REQUIRE(std::bit_cast<uint32_t>(3.3895314e38f) == 0x7F7F0000u);  // the test's premise
  CHECK(bf16::round(3.3895314e38f) == 0x7F7F);
  CHECK(bf16::round(FLT_MAX) == 0x7F80);  // past the last finite bf16's half ulp
  CHECK(float(of_bits(0x3F81)) == 1.0078125f);
  CHECK(float(of_bits(0xC000)) == -2.0f);
}

TEST_CASE("bf16 all_reduce Sum over 4 ranks: exact sums, and sums rounded to bf16") {
  Line l;
  REQUIRE(l.comm.size(Axis::X) == 4);
  // Columns: each rank's value at its coordinate. Every partial sum of
  // columns 0-4, in any order, is a small integer, a multiple of 16 up to
  // 160 or of 0.5 up to 5 (at most 8 significant bits): exact in bf16.
  // Column 4 is 1 + 2^-7, bf16 0x3F81.
  const float in[4][5] = {
      {1, -3, 16, 0.5f, 1},
      {2, -1, 32, 1, 0x1p-7f},
      {3, 1, 48, 1.5f, 0},
      {4, 5, 64, 2, 0},
  };
  // Columns 5 and 6 round. One rank holds a (256; -3), the others s (0.25;
  // -2^-9). Any partial sum without a is a multiple of s of at most 3s:
  // exact. One with a is a + (such a sum) by induction over the reduction
  // tree, and |3s| is under half of a's ulp (2 above 256, so half is 1;
  // 2^-6 in [2, 4), half 2^-7 = 4·2^-9), so it rounds back to a, whatever
  // the order. Exact sums 256.75 and -3 - 3·2^-9, bf16 sums 256 and -3.
  const float round_in[4][2] = {{0.25f, -0x1p-9f}, {0.25f, -0x1p-9f}, {256, -3}, {0.25f, -0x1p-9f}};
  // Columns 7-9: two ranks hold a value, two hold zero. Adding +0 is exact,
  // so in any order the sum is the one addition of the two values, rounded
  // once: 1 + 2^-8 (half an ulp of 1) a tie, to the even 0x3F80; 1 + 3·2^-8
  // a tie, up to the even 0x3F82; 1 + 3·2^-9 (0.75 ulp) up to 0x3F81.
  // Truncation would give 0x3F80, 0x3F81, 0x3F80; ties away from zero
  // 0x3F81 for the first.
  const float pair_in[4][3] = {{1, 0, 0}, {0, 1, 1}, {0x1p-8f, 0, 0}, {0, 3 * 0x1p-8f, 3 * 0x1p-9f}};
  std::vector<bf16> buf = of_floats({in[l.c][0], in[l.c][1], in[l.c][2], in[l.c][3], in[l.c][4],
                                     round_in[l.c][0], round_in[l.c][1], pair_in[l.c][0], pair_in[l.c][1],
                                     pair_in[l.c][2]});
  l.comm.all_reduce(Axis::X, buf.data(), buf.size());
  // 10, 2, 160, 5, 1 + 2^-7; 256, -3; 1, 1 + 2^-6, 1 + 2^-7.
  check_bits(buf, {0x4120, 0x4000, 0x4320, 0x40A0, 0x3F81, 0x4380, 0xC040, 0x3F80, 0x3F82, 0x3F81});
  CHECK(float(buf[5]) != 256.75f);
  CHECK(l.comm.stats.bytes[int(Axis::X)] == 2.0 * 10);  // 2 bytes a value

  // The non-blocking form, the same op.
  std::vector<bf16> ibuf = of_floats({in[l.c][0], round_in[l.c][0], pair_in[l.c][1]});
  l.comm.wait(l.comm.iall_reduce(Axis::X, ibuf.data(), ibuf.size()));
  check_bits(ibuf, {0x4120, 0x4380, 0x3F82});
}

TEST_CASE("bf16 all_reduce Max over 4 ranks") {
  Line l;
  // Columns: negatives; 1 + 2^-7 against 1 (the last bit decides); large
  // values. Then NaNs, which lose to the numbers (fmax's rule, NCCL's): one
  // on each coordinate in turn, and one number among three NaNs. A max that
  // keeps whichever side a comparison with NaN happens to pick would give
  // NaN on some rank for some column.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float in[4][9] = {
      {-1.5f, 1, 3, -8, nan, 1, 1, 1, nan},
      {-2, 1 + 0x1p-7f, 7, -0.25f, 1, nan, -1, -1, nan},
      {-0.25f, 1, 5, -1, 2, 2, nan, 2, 3},
      {-8, 1, -7, -0.5f, -1, -1, 2, nan, nan},
  };
  std::vector<bf16> buf(std::begin(in[l.c]), std::end(in[l.c]));
  l.comm.all_reduce(Axis::X, buf.data(), buf.size(), ReduceOp::Max);
  // -0.25, 1 + 2^-7, 7, -0.25; 2, 2, 2, 2, 3.
  check_bits(buf, {0xBE80, 0x3F81, 0x40E0, 0xBE80, 0x4000, 0x4000, 0x4000, 0x4000, 0x4040});
}

TEST_CASE("bf16 all_gather, blocking and not: each shard's bits in coordinate order") {
  Line l;
  // Three values a shard (an odd count: a 4-byte transport would show):
  // ordinary values, subnormals, zeros of both signs, infinity, and a
  // signalling NaN (0x7F81), which a round trip through float would quiet.
  const uint16_t shard_bits[4][3] = {
      {0x3F81, 0x7F81, 0x0001},
      {0xC000, 0x8001, 0x4120},
      {0x7F7F, 0xFF80, 0x3F80},
      {0x0000, 0x8000, 0xBE80},
  };
  const std::vector<uint16_t> want = {0x3F81, 0x7F81, 0x0001, 0xC000, 0x8001, 0x4120,
                                      0x7F7F, 0xFF80, 0x3F80, 0x0000, 0x8000, 0xBE80};
  std::vector<bf16> shard;
  for (uint16_t b : shard_bits[l.c]) shard.push_back(of_bits(b));

  std::vector<bf16> full(12, of_bits(0x1234));
  l.comm.all_gather(Axis::X, shard.data(), full.data(), shard.size());
  check_bits(full, want);
  CHECK(l.comm.stats.bytes[int(Axis::X)] == 2.0 * 12);

  std::vector<bf16> ifull(12, of_bits(0x1234));
  l.comm.wait(l.comm.iall_gather(Axis::X, shard.data(), ifull.data(), shard.size()));
  check_bits(ifull, want);
}

TEST_CASE("bf16 reduce_scatter, blocking and not: shard i is the sum of every rank's part i") {
  Line l;
  // Element 2i of the rank at coordinate c is (c + 1)(i + 1), so shard i's
  // first value is 10(i + 1), every partial sum an integer up to 40: exact.
  // Element 2i + 1 is 256 on coordinate 2 and 0.25 elsewhere: 256 rounded
  // (the all_reduce case above says why).
  std::vector<bf16> full;
  for (int i = 0; i < 4; ++i) {
    full.push_back(bf16(float((l.c + 1) * (i + 1))));
    full.push_back(bf16(l.c == 2 ? 256.0f : 0.25f));
  }
  // 10, 20, 30, 40; 256.
  const uint16_t first[4] = {0x4120, 0x41A0, 0x41F0, 0x4220};
  const std::vector<uint16_t> want = {first[l.c], 0x4380};

  std::vector<bf16> shard(2, of_bits(0x1234));
  l.comm.reduce_scatter(Axis::X, full.data(), shard.data(), shard.size());
  check_bits(shard, want);

  std::vector<bf16> ishard(2, of_bits(0x1234));
  bool done = false;
  const Comm::Ticket t = l.comm.ireduce_scatter(Axis::X, full.data(), ishard.data(), ishard.size(), [&] {
    done = true;
  });
  l.comm.wait(t);
  CHECK(done);
  check_bits(ishard, want);
}

TEST_CASE("bf16 uneven parts: ireduce_scatter_parts and all_gather_parts") {
  Line l;
  // 10 values over 4 ranks: parts [0, 2), [2, 5), [5, 7), [7, 10). Value j
  // of the rank at coordinate c is (c + 1)(j + 1): sums 10(j + 1), every
  // partial sum an integer up to 100, exact.
  const size_t n = 10;
  const size_t begin[5] = {0, 2, 5, 7, 10};
  std::vector<bf16> full;
  for (size_t j = 0; j < n; ++j) full.push_back(bf16(float(size_t(l.c + 1) * (j + 1))));
  // 10(j + 1) for j = 0..9: 10, 20, ..., 100.
  const uint16_t sums[10] = {0x4120, 0x41A0, 0x41F0, 0x4220, 0x4248, 0x4270, 0x428C, 0x42A0, 0x42B4, 0x42C8};

  const size_t lo = begin[l.c], k = begin[l.c + 1] - lo;
  std::vector<bf16> part(k, of_bits(0x1234));
  l.comm.wait(l.comm.ireduce_scatter_parts(Axis::X, full.data(), part.data(), n));
  check_bits(part, std::vector<uint16_t>(sums + lo, sums + lo + k));

  // Each rank's part in place, the rest garbage; gathered, every rank has all.
  std::vector<bf16> buf(n, of_bits(0x1234));
  for (size_t i = 0; i < k; ++i) buf[lo + i] = part[i];
  l.comm.all_gather_parts(Axis::X, buf.data(), n);
  check_bits(buf, std::vector<uint16_t>(sums, sums + n));
}

TEST_CASE("bf16 isend/irecv between neighbours on an axis") {
  Line l;
  // Coordinates 0 and 1 swap, and 2 and 3; each sends 0x3F81 + c, a
  // signalling NaN and a negative subnormal.
  const int peer = l.c ^ 1;
  const std::vector<bf16> out = {of_bits(uint16_t(0x3F81 + l.c)), of_bits(0x7F81), of_bits(uint16_t(0x8001 + l.c))};
  std::vector<bf16> in(3, of_bits(0x1234));
  const Comm::Ticket r = l.comm.irecv(Axis::X, peer, in.data(), in.size(), 7);
  const Comm::Ticket s = l.comm.isend(Axis::X, peer, out.data(), out.size(), 7);
  l.comm.wait_one(r);
  l.comm.wait_one(s);
  check_bits(in, {uint16_t(0x3F81 + peer), 0x7F81, uint16_t(0x8001 + peer)});
}
