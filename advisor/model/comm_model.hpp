#pragma once
// Collective cost (ring α-β, nccl-tests' bus bandwidth) and which bandwidth a
// grid axis sees, from where its groups' ranks sit on nodes.
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "advisor/core/collective.hpp"
#include "advisor/core/machine_profile.hpp"

namespace ff {

// `bytes` is the buffer as nccl-tests counts it: all-reduce in = out,
// all-gather the output, reduce-scatter the input.
double collective_time(Coll c, int group_size, double bytes, const LinkParams& link);

// Where an axis' groups sit: some may lie inside a node, some across nodes.
struct GroupGeometry {
  bool any_inside = false;
  bool any_across = false;
  // Max over nodes of groups with members on it and elsewhere, counting only
  // one pipeline stage's groups together (see Stages).
  int groups_per_node = 0;
  // Max members one spanning group has on one node (0: none spans). Rings
  // laid along the ranks cross a node once whatever this is, but an MPI's
  // recursive all-gather or reduce-scatter has every member send across at
  // once, so a profile keeps such groups apart.
  int members_per_node = 0;
};
// The pipeline's stages as placed: rank r is in stage (r / stride) % count.
// A tensor axis' groups of different stages that share a node (or an uplink)
// are not counted against each other: 1F1B runs the stages on different
// micro-batches and phases, so their per-layer collectives interleave rather
// than meet (MODEL.md §2, "Which bandwidth").
struct Stages {
  long long stride = 1;
  int count = 1;
};
// The stages as they bear on p's links: none where every switch group (or,
// without them, every node) holds one stage's ranks only, as when the
// stages' stride is a multiple of it; then counting per stage changes
// nothing, and links of many grids are one (LinkCache).
Stages stages_sharing_links(const MachineProfile& p, Stages s);
// Groups of `size` ranks `stride` apart (blocks of stride·size ranks) among
// `total` ranks, `per_node` consecutive ranks a node. Scans one period,
// lcm(per_node, stride·size, the stages' period) ranks, not all of them.
GroupGeometry group_geometry(long long total, int per_node, long long stride, int size, Stages stages = {});

// A measured curve as one tier of an axis prices it, with its link's scaling.
struct CurveUse {
  const MeasuredCurve* curve = nullptr;  // owned by the AxisLink's LinkParams
  double alpha_factor = 1, bw_factor = 1;
};

// Each crossing group holds `members` ranks on each of `nodes` nodes: a
// collective runs inside each node (`intra`), then in one-GPU-a-node groups
// across (`inter`; MODEL.md §2, "Two-level collectives").
struct TwoLevel {
  int members = 0, nodes = 0;
  LinkParams intra, inter;
};

// The links an axis uses: its cost is its slowest group's.
struct AxisLink {
  int size = 1;
  bool inside = false, across = false;
  LinkParams intra, inter;
  int groups_per_node = 0, members_per_node = 0;
  // α and busbw of each collective on each tier, resolved once from by_op and
  // nb_by_op when the link is built: pricing a term then takes no branch.
  // Index: Coll, plus 3 for the non-blocking form.
  std::array<double, 6> intra_alpha{}, intra_busbw{}, inter_alpha{}, inter_busbw{};
  std::array<CurveUse, 6> intra_curve{}, inter_curve{};  // where measured, as alpha and busbw are indexed
  bool nonblocking_differs = false;  // some non-blocking figure is not the blocking one
  bool intra_measured = false, inter_measured = false;  // LinkParams::measured_here of each tier
  double doubling_rounds = 0;  // ⌈log2 size⌉, for all-reduces priced as recursive doubling
  // Rings of this axis sharing one switch group's uplink, the most over
  // switch groups (MODEL.md §2, "Switch groups"); 0: none leaves its group.
  int rings_per_uplink = 0;
  // Two-level collectives (CollectiveForm::TwoLevel), where
  // they apply; null (rings only) otherwise, so that the search's copies of
  // a link carry one empty pointer, not two more links.
  std::shared_ptr<const TwoLevel> two_level;
  // PAT (CollectiveForm::Pat) for this axis' all-gathers and reduce-scatters
  // across nodes: every crossing group has one GPU a node, as NCCL needs.
  bool pat = false;
};
// NCCL's PAT all-gather or reduce-scatter over g ranks on g nodes, as NCCL's
// own tuner prices it (src/graph/tuning.cc, 2.24 and later) with the link's
// α in place of its 14 µs network step: call + 8 µs + ⌊log2 g⌋·α/3.5 +
// 2.8 µs·g, the buffer at 0.75 of the busbw (MODEL.md §2).
double pat_time(int g, double bytes, double alpha, double busbw, double call_s);
// A crossing group's collective in the two-level form: all-gather across
// then inside, reduce-scatter inside then across, all-reduce as
// reduce-scatter inside, all-reduce across, all-gather inside.
double two_level_time(Coll c, double bytes, const AxisLink& l);
LinkParams intra_link(const MachineProfile& p, long long stride, int size);
// The entry measured for (groups_per_node, size, members_per_node) at `rings`
// an uplink, else at the most rings below (unstated counts as 0), else the
// node's link shared by the groups (MODEL.md §2's ring rule).
LinkParams inter_link(const MachineProfile& p, int groups_per_node, int size, int members_per_node, int rings = 0);
// A link of groups of `size` that leave their switch group, `rings` of them
// sharing each uplink: every busbw at most the global link's share, every α
// at least the global link's where the profile gives one; measured curves
// alike (MODEL.md §2, "Switch groups"). No change where rings is 0 or the
// profile has no switch groups.
void bound_by_switch_groups(LinkParams& l, const SwitchGroups& sg, int size, int rings);
// How many of an axis' groups cross one switch group's uplink, the most over
// switch groups; 0 where the profile has none or no group leaves its own.
int rings_per_uplink(const MachineProfile& p, long long total, long long stride, int size, Stages stages = {});
AxisLink axis_link(const MachineProfile& p, long long total, long long stride, int size, Stages stages = {});
// The link of one group of all G ranks (the end-of-step scalars): inside a
// node, or across every node, bounded by the switch groups' uplinks where it
// spans several (one ring crosses each: no walk over the ranks needed).
LinkParams world_link(const MachineProfile& p, long long G);
// `nonblocking`: issued as MPI_I... and waited for (the overlap flags' form).
double collective_time(Coll c, double bytes, const AxisLink& link, bool nonblocking = false);

// Neighbouring pipeline stages (MODEL.md §9): every rank r outside the last
// stage exchanges a message each way with r + stride, all pairs at once.
struct PairLink {
  bool inside = false, across = false;
  int pairs_per_node = 0;  // most crossing pairs touching one node: they share its NICs
  int pairs_per_uplink = 0;  // most pairs crossing one switch group's uplink (0: none leaves its group)
  P2PLink intra, inter;    // inter: one pair's share
  bool measured = false;   // from the profile's p2p section, not a 2-rank all-gather
};
PairLink pair_link(const MachineProfile& p, long long total, long long stride, int size);
// One message of `bytes` each way; the slowest pair's.
double message_time(double bytes, const PairLink& l);

// axis_link memoized per (stride, size, stages) for one machine and rank
// count: an axis' groups depend on nothing else, so a search prices each
// geometry once.
class LinkCache {
 public:
  LinkCache(const MachineProfile& p, long long total) : p_(p), total_(total) {}
  const AxisLink& get(long long stride, int size, Stages stages = {});
  const PairLink& pair(long long stride, int size);

 private:
  struct Key {
    uint64_t group, stages;  // stride·2³² + size, likewise for the stages
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.group * 0x9e3779b97f4a7c15ULL ^ k.stages); }
  };
  const MachineProfile& p_;
  long long total_;
  std::unordered_map<Key, AxisLink, KeyHash> memo_;
  std::unordered_map<uint64_t, PairLink> pair_memo_;
};

}  // namespace ff
