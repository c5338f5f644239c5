#pragma once
// Point-to-point (`--ops send-recv`): pairs exchanging one message each way
// at once, as neighbouring pipeline stages do per micro-batch (activations
// forward, gradients backward). A pair is a 2-rank group of the collectives'
// geometries: inside a node `stride` apart (rank r with r + stride in blocks
// of 2·stride), across nodes one rank on each of 2 nodes with c pairs
// sharing every node's links. All pairs of a geometry run at once.
#include <string>
#include <vector>

#include "advisor/core/measurement.hpp"
#include "measure/backend.hpp"
#include "measure/harness.hpp"
#include "measure/table.hpp"

namespace ff::measure {

// "send-recv  intra stride 1", "send-recv  inter 2 pairs/node".
std::string pair_name(const ff::Geometry& g);

// The pair geometries among `geometries` (size 2, one member a node across
// nodes, on consecutive nodes: the p2p table has no rings-an-uplink key), in
// their order.
std::vector<ff::Geometry> pair_geometries(const std::vector<ff::Geometry>& geometries);

struct PairResults {
  std::vector<ff::P2PSample> samples;  // the same on every rank
  std::vector<TableRow> table;
};

// Every pair geometry at every size (bytes one rank sends), after checking
// at the smallest and largest that each rank receives exactly its partner's
// data (throws std::runtime_error otherwise). nccl-tests' sendrecv
// conventions: algbw = busbw = bytes / time. Every rank of MPI_COMM_WORLD calls it.
PairResults measure_send_recv(Backend& b, const std::vector<ff::Geometry>& pairs, const std::vector<size_t>& sizes,
                              int rank, int ranks, int per_node, const SweepOptions& o, const Say& say);

}  // namespace ff::measure
