#pragma once
// The filter group: which configurations a search tries, shared by recommend
// (which prices them) and validate (which runs them). A filter flag keeps the
// meaning its configuration flag has (option_groups.hpp) and takes a list of
// its values: --micro-batch 1,2 tries both, --recompute selective,full those two.
#include <string>
#include <vector>

#include "advisor/model/search.hpp"

namespace CLI {
class App;
}

namespace ff::advisor {

inline constexpr const char* kFilterGroup = "Filters";

struct FilterFlags {
  std::vector<int> micro_batches;
  int max_micro_batch = 16;
  std::vector<std::string> recompute;  // --recompute LIST (bare: full)
  bool no_recompute = false;
  bool offload = false, no_offload = false;
  bool shard_optimizer = false, no_shard_optimizer = false;
  bool sequence_parallel = false, no_sequence_parallel = false;
  std::vector<int> pipelines;  // empty: every stage count dividing the layers and the GPUs
  std::vector<int> virtual_stages;  // empty: 1 and 2 where they apply
  std::string order, overlap;  // empty: every one
};
void add_filter_options(CLI::App& app, FilterFlags& f);

// The search's options the filters say; throws InputError naming the flag.
// Offload and the sharded optimizer are tried where the machine allows them
// unless a flag excludes them, or, with `state_when_asked` (validate, whose
// runs sweep one kind at a time), only where a flag asks for them; there
// sequence parallelism, which the engine does not run, is refused.
SearchOptions search_filters(const FilterFlags& f, const Job& job, const MachineProfile& m,
                             bool state_when_asked = false);

}  // namespace ff::advisor
