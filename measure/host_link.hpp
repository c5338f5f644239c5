#pragma once
// The host link (offloaded optimizer state: fp32 weights and Adam moments
// copied between host and GPU every iteration, every GPU of a node at once):
// host to device and device to host, one GPU of a node alone and all of them
// at once. With CUDA, pinned cudaMemcpyAsync; on CPU ranks a memcpy between
// two host buffers stands in (Backend::host_link_kind), which is not a GPU link.
#include <vector>

#include "advisor/core/measurement.hpp"
#include "measure/backend.hpp"
#include "measure/harness.hpp"
#include "measure/table.hpp"

namespace ff::measure {

struct HostLinkResults {
  std::vector<ff::HostLinkSample> samples;  // the same on every rank
  std::vector<TableRow> table;
};

// Every size (bytes one GPU copies) each way, world rank 0 alone (nodes do
// not share host links, so one rank stands for one GPU of an idle node) and
// every rank at once (samples say `per_node` GPUs), after checking at the
// largest size that a round trip returns the data unchanged (throws
// std::runtime_error otherwise). Every rank of MPI_COMM_WORLD calls it.
HostLinkResults measure_host_link(Backend& b, const std::vector<size_t>& sizes, int rank, int ranks, int per_node,
                                  const SweepOptions& o, const Say& say);

}  // namespace ff::measure
