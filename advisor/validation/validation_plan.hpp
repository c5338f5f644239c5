#pragma once
// Which runs a validation makes, in which order, and what an earlier report
// keeps: the planning `advisor validate` does before it launches anything.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/model/search.hpp"
#include "advisor/validation/validation_placement.hpp"

namespace ff::advisor {

// Every configuration the engine can run and memory holds, per grid shape,
// among those `so`'s filters leave (its micro-batches, recompute, stage
// counts, order, overlap, offload and sharding). Overlap flags with nothing
// to act on are folded, as the search does. `skipped` counts the rest by reason.
std::vector<std::vector<Config>> feasible_by_grid(const Job& job, const MachineProfile& p, const SearchOptions& so,
                                                  std::map<std::string, int>& skipped);

// Round-robin over grid shapes, each shape's configurations in a seeded
// shuffle: the first k runs cover min(k, shapes) shapes, so an interrupted
// validation is still broad, and a larger --max-configs extends a smaller one.
std::vector<Config> run_order(std::vector<std::vector<Config>> by_grid, unsigned long long seed);

// The sample in run order, at most `max_configs`, with the placement check's
// pair always in it.
std::vector<Config> plan_of(const std::vector<std::vector<Config>>& by_grid, unsigned long long seed, int max_configs,
                            const PlacementCheck& pc);

// The report at `out`, checked to be a validation of the job `fresh`
// describes (model, ranks, batch, steps, dtype, device, profile); throws
// InputError saying what differs.
nlohmann::json load_resumed(const std::string& out, const nlohmann::json& fresh);

// The runs of an earlier report worth keeping: those with a finished
// repeat, only their finished repeats (a failed one is run again), in the
// report's order.
nlohmann::json kept_runs(const nlohmann::json& old);

}  // namespace ff::advisor
