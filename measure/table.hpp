#pragma once
// The results table, nccl-tests' columns, for collectives, pairs and the host
// link alike: one block per operation and geometry, one line per size.
#include <cstddef>
#include <string>
#include <vector>

namespace ff::measure {

struct TableRow {
  std::string head;     // "all-reduce  intra stride 1 size 4": a new block when it changes
  std::string at_once;  // "2 groups at once"
  double bytes = 0;     // nccl-tests' size column
  size_t count = 0;     // floats per rank passed to the backend
  int iters = 0;
  std::vector<double> times_s;     // one per repeat
  std::vector<double> iterations;  // every timed iteration, max over ranks, all repeats
  double busbw_factor = 1;         // busbw = algbw × this
};

// On stdout, from rank 0 only (the caller's business).
void print_table(const std::vector<TableRow>& rows);

}  // namespace ff::measure
