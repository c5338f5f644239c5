#pragma once
// Reading nccl-tests output (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf) into collective samples, so measurements users already
// have can calibrate a profile (MODEL.md §5).
//
// Text output in every variant seen in the wild: with an `error` column and no
// `root` (before nccl-tests 2.10), with `root` and `#wrong`, with per-iteration
// or timestamp columns, with the leading '#' stripped by a launcher, or every
// line prefixed with a tag ("[1,0]<stdout>:", "[0] ", "0: ", "nid001234: ").
// And the `-J file.json` output. The out-of-place time of each row is used.
//
// The group geometry is, in order of precedence:
//  1. given (NcclTestsOptions::geometry; the CLI's --stride or
//     --groups-per-node, with --size or the ranks listed);
//  2. read from the "# Using devices" lines: ranks of one "Group" form a
//     group (several groups run at once under NCCL_TESTS_SPLIT); a group whose
//     ranks share a host is intra-node with stride = the distance between
//     consecutive ranks; one spanning hosts is inter-node with groups_per_node
//     = the most groups with members both on one host and elsewhere, and
//     members_per_node = the most ranks of one such group on one host. A
//     group size given (NcclTestsOptions::size) must agree;
//  3. a log that lists no devices needs the group size given: size <=
//     gpus_per_node is one intra-node group of stride 1, otherwise one
//     inter-node group, 1 group per node, 1 member per node (the log does
//     not say how its ranks sat).
// Rank numbers are what the geometry sees: a run restricted with
// CUDA_VISIBLE_DEVICES=0,2,4,6 shows ranks 0..3, so give its stride.
#include <optional>
#include <string>
#include <vector>

#include "advisor/core/measurement.hpp"

namespace ff {

struct NcclTestsOptions {
  int gpus_per_node = 0;              // required: ranks a node holds
  std::optional<Geometry> geometry;   // given on the command line; size 0: the ranks listed
  int size = 0;                       // ranks per group, given without the rest of a geometry
  std::optional<Coll> op;             // given; else from the log or the file name
};

// One run of one nccl-tests binary (a log may hold several, one after another).
struct NcclTestsRun {
  std::string file;
  int first_line = 0;                 // where the run's header is (0 for JSON)
  Coll op = Coll::AllReduce;
  int ranks = 0;                      // ranks listed under "# Using devices" (0: none listed)
  std::vector<std::string> hosts;     // distinct, in order of appearance
  std::string version;                // "2.19.6" when printed
  std::string date;                   // JSON start_time, when present
  Geometry geometry;
  std::string geometry_from;          // how the geometry was decided, for the report
  std::vector<CollectiveSample> samples;  // one per message size > 0, repeats merged
  std::vector<std::string> notes;     // rows skipped and why ("FILE:LINE: ...")
};

// Parses `text` (the content of `file`); throws InputError "FILE:LINE: ..."
// for a file that is not nccl-tests output, a truncated one, or a row that
// cannot be read.
std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text, const std::string& file,
                                           const NcclTestsOptions& options);
// Reads and parses a file.
std::vector<NcclTestsRun> read_nccl_tests(const std::string& path, const NcclTestsOptions& options);

// A measurement record of the runs (backend "nccl-tests"); samples of the same
// collective, geometry and size from different runs are merged as repeats.
Measurement measurement_from_nccl_tests(const std::vector<NcclTestsRun>& runs, int gpus_per_node,
                                        const std::string& command);

}  // namespace ff
