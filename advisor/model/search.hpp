#pragma once
// Exhaustive search: every pipeline depth P (a divisor of the layers and of
// G) × ordered factorization of G/P over X, Y, Z, D × distinct placement ×
// micro-batch × recompute × overlap flags, under divisibility and memory.
#include <cstdint>
#include <string>
#include <vector>

#include "advisor/model/prediction.hpp"

namespace ff {

struct SearchOptions {
  int max_micro_batch = 16;            // micro-batches tried: divisors of B/(G_z·G_d) up to this
  std::vector<int> micro_batches;      // if set, only these
  // Recompute settings tried. Selective beside none only where attention is
  // unfused: with flash attention it keeps and costs what none does.
  std::vector<Recompute> recompute{Recompute::None, Recompute::Selective, Recompute::Full};
  bool fixed_overlap = false;          // if set, only `overlap`
  Overlap overlap;
  bool fixed_order = false;            // if set, only `order` (its canonical placement)
  Order order;
  int top = 10;
  bool keep_rejected = false;          // record why (grid, micro-batch, recompute) did not fit
  std::vector<int> pipelines;          // if set, only these stage counts (else every divisor of L and G)
  // Offload is tried where the profile has a host link, unless one is excluded.
  bool offload_on = true, offload_off = true;
  // The optimizer state sharded over D is tried where G_d > 1, unless excluded.
  bool shard_on = true, shard_off = true;
  // Sequence parallelism is tried where G_y > 1 divides the micro-batch's
  // tokens, unless excluded.
  bool sequence_parallel_on = true, sequence_parallel_off = true;
  // Model chunks per stage tried where Megatron's rules allow them (G_p > 1,
  // L divisible by G_p·v, the micro-batches by G_p; MODEL.md §9).
  std::vector<int> virtual_stages{1, 2};
  // Threads pricing grids (0: every core). The result does not depend on it.
  int threads = 0;
  // Count without pricing the configurations a lower bound on their time
  // shows the ranking would drop (false: price every one; the result is the same).
  bool prune = true;
};
// The stage counts a search tries.
std::vector<int> pipeline_choices(const Job& job, const SearchOptions& opt);
// Per grid and micro-batch, what a search (and validate) tries: sequence
// parallelism where asked and Y can split the tokens, model chunks per stage
// where Megatron's rules allow them; where only what cannot run was asked,
// the plain choice (no SP, v = 1).
std::vector<bool> sequence_parallel_choices(const Job& job, const Grid& g, int mb, const SearchOptions& opt);
std::vector<int> virtual_stage_choices(const Job& job, const Grid& g, int mb, const SearchOptions& opt);

struct Ranked {
  Config config;
  Estimate estimate;
  MemoryUse memory;
  int equivalent_orders = 0;  // other placement orders with exactly this cost
};

struct Rejected {
  Grid grid;
  int micro_batch = 0;  // 0: the grid itself cannot split the job
  Recompute recompute = Recompute::None;
  std::string reason;
};

// One feasible configuration, small enough to keep millions.
struct Candidate {
  double time_s;
  uint32_t grid : 20;            // index into SearchResult::grids
  uint32_t recompute : 4;        // a Recompute
  uint32_t virtual_stages : 8;  // model chunks per stage
  uint16_t micro_batch;
  uint8_t order;       // index into distinct_orders(grid)
  uint8_t flags;       // bit 0 otp, 1 oar, 2 ors, 3 oag, 4 offload, 5 odp, 6 sharded optimizer, 7 sequence parallel
};
Config candidate_config(const Candidate& c, const std::vector<Grid>& grids, Dtype dt);

struct SearchResult {
  long long evaluated = 0;  // after the divisibility filter, each distinct placement once
  long long feasible = 0;   // of those, the ones that fit in memory (priced or bounded out of the ranking)
  long long grids_total = 0, grids_divisible = 0;
  std::vector<Grid> grids;               // the divisible grids
  // The feasible configurations that can still trade places with the top
  // ones (within 1.5× of the top-th's time), fastest first, one per set of
  // equally-costed orders; equivalent_orders[i] counts the orders folded in.
  std::vector<Candidate> candidates;
  std::vector<int> equivalent_orders;
  std::vector<Ranked> top;               // the best `top`, fully priced
  std::vector<Rejected> rejected;        // with keep_rejected
  std::vector<std::string> split_reasons;  // one line per distinct reason grids were not divisible, with counts
  double smallest_footprint = 0;         // bytes: the least memory any divisible configuration needs
  Config smallest_config;
  double seconds = 0;                    // wall time of the search
  int threads = 1;                       // threads that priced grids
};

SearchResult search(const Job& job, const MachineProfile& p, const SearchOptions& opt);

}  // namespace ff
