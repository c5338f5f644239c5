#pragma once
// The engine's run record (MODEL.md §3), built at the edge from a RunResult.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/train.hpp"

namespace ff::engine {

struct Provenance {
  std::string host, mpi, blas, git, command;
};

// `dtype` is the scalar that ran: "fp32" or "fp64".
nlohmann::json run_record(const RunOptions& o, const std::string& dtype, int ranks, const RunResult& r,
                          const Provenance& p);

// `engine --trace-comm`: every rank's communication events, one row each.
nlohmann::json comm_trace_json(const std::vector<std::vector<CommEvent>>& ranks);

}  // namespace ff::engine
