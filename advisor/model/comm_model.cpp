#include "advisor/model/comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace ff {

namespace {

double ring_time(Coll c, int g, double bytes, double alpha, double busbw) {
  const double steps = ring_steps(c, g);
  return alpha * steps + steps / g * bytes / busbw;
}

// An all-reduce as NCCL's trees and MPI's recursive doubling run small
// messages, where the profile did not measure this group size: ⌈log2 g⌉
// rounds, each sending the whole buffer (Thakur, Rabenseifner and Gropp
// 2005), priced at the link's latency and bandwidth; the ring otherwise.
double doubling_rounds(int g) { return std::ceil(std::log2(double(g))); }

// The measured times interpolated in log(bytes)–log(time) between sizes;
// below the smallest size its time (latency-bound), beyond the largest that
// time plus the rest at the fitted busbw; then scaled as its link is.
double curve_time(const CurveUse& u, Coll c, int g, double bytes) {
  const MeasuredCurve& m = *u.curve;
  const double steps = ring_steps(c, g);
  const size_t n = m.bytes.size();
  double t;
  if (bytes <= m.bytes[0]) {
    t = m.seconds[0];
  } else if (bytes >= m.bytes[n - 1]) {
    t = m.seconds[n - 1] + (bytes - m.bytes[n - 1]) * steps / g / m.busbw;
  } else {
    const size_t i = size_t(std::upper_bound(m.bytes.begin(), m.bytes.end(), bytes) - m.bytes.begin());
    const double f = std::log(bytes / m.bytes[i - 1]) / std::log(m.bytes[i] / m.bytes[i - 1]);
    t = m.seconds[i - 1] * std::pow(m.seconds[i] / m.seconds[i - 1], f);
  }
  return scaled_curve_time(t, m.alpha_s * steps, u.alpha_factor, u.bw_factor);
}

// A fitted link as the library runs it: the call's fixed cost, then the ring
// in the faster of its protocols (MODEL.md §2, "Rings at scale"); an
// all-reduce not measured at this size may take recursive doubling instead.
// A measured curve already holds all of that.
double priced_time(Coll c, int g, double bytes, double alpha, double busbw, bool measured_here, double rounds,
                   const CurveUse& curve, const LinkParams& l) {
  if (curve.curve) return curve_time(curve, c, g, bytes);
  double ring = ring_time(c, g, bytes, alpha, busbw);
  if (l.ll_alpha_s > 0) ring = std::min(ring, ring_time(c, g, bytes, l.ll_alpha_s, busbw * l.ll_bw_fraction));
  if (c != Coll::AllReduce || measured_here) return l.call_s + ring;
  return l.call_s + std::min(ring, rounds * (alpha + bytes / busbw));
}

void resolve(const LinkParams& l, std::array<double, 6>& alpha, std::array<double, 6>& busbw,
             std::array<CurveUse, 6>& curve) {
  for (int k = 0; k < 3; ++k) {
    curve[k] = {l.curve[k].get(), l.curve_alpha_factor, l.curve_bw_factor};
    if (!l.nb_by_op[k]) curve[k + 3] = curve[k];  // measured one form (or polling): the same curve
    alpha[k] = l.by_op[k] ? l.op_alpha_s[k] : l.alpha_s;
    busbw[k] = l.by_op[k] ? l.op_busbw[k] : l.busbw;
    alpha[k + 3] = l.nb_by_op[k] ? l.nb_alpha_s[k] : alpha[k];
    busbw[k + 3] = l.nb_by_op[k] ? l.nb_busbw[k] : busbw[k];
  }
}

}  // namespace

double collective_time(Coll c, int g, double bytes, const LinkParams& link) {
  if (g <= 1) return 0;
  const int k = static_cast<int>(c);
  return priced_time(c, g, bytes, link.by_op[k] ? link.op_alpha_s[k] : link.alpha_s,
                     link.by_op[k] ? link.op_busbw[k] : link.busbw, link.measured_here, doubling_rounds(g),
                     {link.curve[k].get(), link.curve_alpha_factor, link.curve_bw_factor}, link);
}

GroupGeometry group_geometry(long long total, int per_node, long long stride, int size, Stages stages) {
  GroupGeometry geo;
  if (size <= 1) return geo;
  long long block = stride * size;
  long long period = std::lcm(static_cast<long long>(per_node), block);
  if (stages.count > 1) period = std::lcm(period, stages.stride * stages.count);
  period = std::min(total, period);
  long long nodes = (period + per_node - 1) / per_node;
  const size_t lanes = size_t(std::max(1, stages.count));
  std::vector<int> spanning(static_cast<size_t>(nodes) * lanes, 0), members(static_cast<size_t>(nodes), 0);
  std::vector<long long> last_counted(static_cast<size_t>(nodes), -1);
  for (long long start = 0; start < period; start += block)
    for (long long b = start; b < start + stride; ++b) {  // the group b, b+s, …, b+(size−1)s
      long long first = b / per_node, last = (b + (size - 1) * stride) / per_node;
      if (first == last) {
        geo.any_inside = true;
        continue;
      }
      geo.any_across = true;
      // Every member of a group is in its stage (a group varies along its own axis only).
      const size_t lane = stages.count > 1 ? size_t((b / stages.stride) % stages.count) : 0;
      for (int j = 0; j < size; ++j) {
        long long node = (b + j * stride) / per_node;
        if (last_counted[node] != b) {  // count each group once per node
          last_counted[node] = b;
          ++spanning[size_t(node) * lanes + lane];
          members[node] = 0;
        }
        geo.members_per_node = std::max(geo.members_per_node, ++members[node]);
      }
    }
  geo.groups_per_node = *std::max_element(spanning.begin(), spanning.end());
  return geo;
}

LinkParams intra_link(const MachineProfile& p, long long stride, int size) {
  // Intra-node links are not uniform (MI250X): a geometry the table lacks
  // gets the profile's stated default, not a neighbour's figure.
  for (const auto& e : p.intra)
    if (e.size == size && e.stride == stride) return e.link;
  return p.intra_default;
}

LinkParams inter_link(const MachineProfile& p, int groups_per_node, int size, int members_per_node, int rings) {
  // Of the entries measured for the geometry, the one timed at these rings
  // an uplink; else the most rings below them (the bound adds the rest); an
  // entry timed at more rings than these would price them too slow.
  const InterEntry* pick = nullptr;
  auto rings_of = [](const InterEntry& e) { return std::max(0, e.link.rings_per_uplink); };
  for (const auto& e : p.inter) {
    if (e.groups_per_node != groups_per_node || e.size != size || e.members_per_node != members_per_node) continue;
    if (rings_of(e) == rings) return e.link;
    if (rings_of(e) < rings && (!pick || rings_of(e) > rings_of(*pick))) pick = &e;
  }
  if (pick) return pick->link;
  LinkParams l = p.inter_node;  // c groups share the node's NICs
  scale_link(l, 1.0 / std::max(1, groups_per_node), 1);
  return l;
}

void bound_by_switch_groups(LinkParams& l, const SwitchGroups& sg, int size, int rings) {
  if (sg.nodes_per_group <= 0 || rings <= 0 || size <= 1) return;
  // Timed on this fabric with as many rings sharing each uplink: the
  // measurement already holds the uplink, its sharing and its latency.
  if (l.rings_per_uplink == rings) return;
  // Each ring laid along the ranks leaves a switch group once and comes back
  // once: it takes one share of the uplink each way, as a node's ring takes
  // one share of its NIC (the ring rule, one tier up).
  const double share = sg.busbw / rings;
  auto bw = [share](double& b) { b = std::min(b, share); };
  auto lat = [&sg](double& a) { a = std::max(a, sg.alpha_s); };
  bw(l.busbw), lat(l.alpha_s);
  for (int k = 0; k < 3; ++k) {
    bw(l.op_busbw[k]), lat(l.op_alpha_s[k]);
    bw(l.nb_busbw[k]), lat(l.nb_alpha_s[k]);
    if (!l.curve[k]) continue;
    // A curve measured inside a group (or at another crossing count): its
    // latency part raised to the global α, the rest slowed to the share.
    const MeasuredCurve& c = *l.curve[k];
    const double busbw = c.busbw * l.curve_bw_factor, alpha = c.alpha_s * l.curve_alpha_factor;
    const double bw_factor = busbw > share ? share / busbw : 1;
    const double alpha_factor = alpha > 0 && sg.alpha_s > alpha ? sg.alpha_s / alpha : 1;
    if (bw_factor == 1 && alpha_factor == 1) continue;
    auto b = std::make_shared<MeasuredCurve>(c);
    const double latency = c.alpha_s * ring_steps(static_cast<Coll>(k), size);
    for (double& t : b->seconds) t = scaled_curve_time(t, latency, alpha_factor, bw_factor);
    b->alpha_s *= alpha_factor, b->busbw *= bw_factor;
    l.curve[k] = std::move(b);
  }
}

int rings_per_uplink(const MachineProfile& p, long long total, long long stride, int size, Stages stages) {
  if (p.switch_groups.nodes_per_group <= 0) return 0;
  // A switch group is a node of nodes_per_group nodes: its uplink is shared
  // as a node's link is, by the groups with members in it and elsewhere.
  const GroupGeometry g =
      group_geometry(total, p.gpus_per_node * p.switch_groups.nodes_per_group, stride, size, stages);
  return g.any_across ? g.groups_per_node : 0;
}

LinkParams world_link(const MachineProfile& p, long long G) {
  const int per_node = p.gpus_per_node;
  if (G <= per_node) return intra_link(p, 1, int(G));
  const long long per_group = 1LL * per_node * p.switch_groups.nodes_per_group;
  const int rings = per_group > 0 && G > per_group ? 1 : 0;
  LinkParams l = inter_link(p, 1, int(G), per_node, rings);
  bound_by_switch_groups(l, p.switch_groups, int(G), rings);
  return l;
}

Stages stages_sharing_links(const MachineProfile& p, Stages s) {
  const long long block = 1LL * p.gpus_per_node * std::max(1, p.switch_groups.nodes_per_group);
  return s.count <= 1 || s.stride % block == 0 ? Stages{} : s;
}

AxisLink axis_link(const MachineProfile& p, long long total, long long stride, int size, Stages stages) {
  AxisLink l;
  l.size = size;
  if (size <= 1) return l;
  stages = stages_sharing_links(p, stages);
  // Per stage only where groups share a node at all: the stages' period can
  // make the scan longer, and one group a node needs none.
  GroupGeometry geo = group_geometry(total, p.gpus_per_node, stride, size);
  if (stages.count > 1 && geo.groups_per_node > 1) geo = group_geometry(total, p.gpus_per_node, stride, size, stages);
  l.inside = geo.any_inside;
  l.across = geo.any_across;
  l.groups_per_node = geo.groups_per_node;
  l.members_per_node = geo.members_per_node;
  if (l.inside) l.intra = intra_link(p, stride, size);
  if (l.across) {
    // Some groups leave their switch group: the slowest of them prices the tier.
    l.rings_per_uplink = rings_per_uplink(p, total, stride, size, stages);
    l.inter = inter_link(p, geo.groups_per_node, size, geo.members_per_node, l.rings_per_uplink);
    bound_by_switch_groups(l.inter, p.switch_groups, size, l.rings_per_uplink);
    // Two-level where every crossing group has the same m ranks on each of
    // its n nodes: then each node's GPUs are one-GPU-a-node groups of n
    // across, m of them for each group (every GPU of the node in one).
    const int per_node = p.gpus_per_node;
    if (p.collectives == CollectiveForm::TwoLevel && stride < per_node && per_node % stride == 0 &&
        (stride * size) % per_node == 0) {
      const int m = int(per_node / stride), n = size / m;
      if (m >= 2 && n >= 2) {
        const int rings = l.rings_per_uplink * m;
        auto t = std::make_shared<TwoLevel>(TwoLevel{m, n, intra_link(p, stride, m), inter_link(p, per_node, n, 1, rings)});
        bound_by_switch_groups(t->inter, p.switch_groups, n, rings);
        l.two_level = std::move(t);
      }
    }
  }
  // NCCL turns PAT on by itself only where every rank has a node of its own.
  l.pat = l.across && p.collectives == CollectiveForm::Pat && geo.members_per_node == 1;
  resolve(l.intra, l.intra_alpha, l.intra_busbw, l.intra_curve);
  resolve(l.inter, l.inter_alpha, l.inter_busbw, l.inter_curve);
  l.intra_measured = l.intra.measured_here;
  l.inter_measured = l.inter.measured_here;
  l.doubling_rounds = doubling_rounds(size);
  for (int k = 0; k < 3; ++k)
    l.nonblocking_differs |= l.intra_alpha[k + 3] != l.intra_alpha[k] || l.intra_busbw[k + 3] != l.intra_busbw[k] ||
                             l.inter_alpha[k + 3] != l.inter_alpha[k] || l.inter_busbw[k + 3] != l.inter_busbw[k] ||
                             l.intra_curve[k + 3].curve != l.intra_curve[k].curve ||
                             l.inter_curve[k + 3].curve != l.inter_curve[k].curve;
  return l;
}

double collective_time(Coll c, double bytes, const AxisLink& l, bool nonblocking) {
  double t = 0;
  if (l.size <= 1) return 0;
  const int k = static_cast<int>(c) + (nonblocking ? 3 : 0);
  if (l.inside)
    t = priced_time(c, l.size, bytes, l.intra_alpha[k], l.intra_busbw[k], l.intra_measured, l.doubling_rounds,
                    l.intra_curve[k], l.intra);
  if (l.across) {
    double ring = priced_time(c, l.size, bytes, l.inter_alpha[k], l.inter_busbw[k], l.inter_measured,
                              l.doubling_rounds, l.inter_curve[k], l.inter);
    if (l.two_level) ring = std::min(ring, two_level_time(c, bytes, l));
    // A measured curve holds whatever algorithm the library chose.
    if (l.pat && c != Coll::AllReduce && !l.inter_curve[k].curve)
      ring = std::min(ring, pat_time(l.size, bytes, l.inter_alpha[k], l.inter_busbw[k], l.inter.call_s));
    t = std::max(t, ring);
  }
  return t;
}

double pat_time(int g, double bytes, double alpha, double busbw, double call_s) {
  // NCCL's tuner: a base of 8 µs, a log-depth part of α/3.5 a level
  // (⌊log2 g⌋ levels) and a part still linear in the ranks; the bandwidth
  // not scaled by (g−1)/g.
  const double levels = std::floor(std::log2(double(g)));
  return call_s + 8e-6 + levels * alpha / 3.5 + 2.8e-6 * g + bytes / (0.75 * busbw);
}

double two_level_time(Coll c, double bytes, const AxisLink& l) {
  if (!l.two_level) return collective_time(c, bytes, l);
  const TwoLevel& t = *l.two_level;
  const int m = t.members, n = t.nodes;
  const double shard = bytes / m;  // what each one-GPU-a-node group moves
  switch (c) {
    case Coll::AllGather:
      return collective_time(Coll::AllGather, n, shard, t.inter) + collective_time(Coll::AllGather, m, bytes, t.intra);
    case Coll::ReduceScatter:
      return collective_time(Coll::ReduceScatter, m, bytes, t.intra) +
             collective_time(Coll::ReduceScatter, n, shard, t.inter);
    case Coll::AllReduce:
      return collective_time(Coll::ReduceScatter, m, bytes, t.intra) + collective_time(Coll::AllReduce, n, shard, t.inter) +
             collective_time(Coll::AllGather, m, bytes, t.intra);
  }
  return 0;
}

namespace {

// A pair's wire pattern is a 2-rank all-gather's: each rank sends its half
// to the other, so for g = 2 its busbw is the bandwidth each way.
P2PLink pair_from_allgather(const LinkParams& l) {
  const int k = static_cast<int>(Coll::AllGather);
  return {l.by_op[k] ? l.op_alpha_s[k] : l.alpha_s, l.by_op[k] ? l.op_busbw[k] : l.busbw};
}

}  // namespace

PairLink pair_link(const MachineProfile& p, long long total, long long stride, int size) {
  PairLink l;
  if (size <= 1) return l;
  const int per_node = p.gpus_per_node;
  // A switch group's uplink, like a node's link, carries every pair with one
  // end in it (MODEL.md §2, "Switch groups"); a switch group holds whole
  // nodes, so its period is one of the nodes' too.
  const long long per_group = static_cast<long long>(per_node) * std::max(1, p.switch_groups.nodes_per_group);
  const long long period = std::min(total, std::lcm(per_group, stride * size));
  std::vector<int> crossing(static_cast<size_t>((period + per_node - 1) / per_node), 0);
  std::vector<int> uplink(static_cast<size_t>((period + per_group - 1) / per_group), 0);
  for (long long r = 0; r < period; ++r) {
    if ((r / stride) % size == size - 1) continue;  // the last stage sends to no next stage
    long long a = r / per_node, b = (r + stride) / per_node;
    if (a == b) {
      l.inside = true;
      continue;
    }
    l.across = true;
    ++crossing[a];
    ++crossing[b];
    const long long ga = r / per_group, gb = (r + stride) / per_group;
    if (p.switch_groups.nodes_per_group > 0 && ga != gb) {
      ++uplink[size_t(ga)];
      ++uplink[size_t(gb)];
    }
  }
  l.pairs_per_node = *std::max_element(crossing.begin(), crossing.end());
  l.pairs_per_uplink = *std::max_element(uplink.begin(), uplink.end());
  l.measured = p.has_p2p;
  if (p.has_p2p) {
    l.intra = p.p2p_intra;
    l.inter = p.p2p_inter;
    l.inter.bw /= std::max(1, l.pairs_per_node);
  } else {
    l.intra = pair_from_allgather(intra_link(p, stride, 2));
    l.inter = pair_from_allgather(inter_link(p, std::max(1, l.pairs_per_node), 2, 1));
  }
  if (l.pairs_per_uplink > 0) {  // a pair each way is a 2-rank ring's wire pattern: the same share
    l.inter.bw = std::min(l.inter.bw, p.switch_groups.busbw / l.pairs_per_uplink);
    l.inter.alpha_s = std::max(l.inter.alpha_s, p.switch_groups.alpha_s);
  }
  return l;
}

double message_time(double bytes, const PairLink& l) {
  double t = 0;
  if (l.inside) t = l.intra.alpha_s + bytes / l.intra.bw;
  if (l.across) t = std::max(t, l.inter.alpha_s + bytes / l.inter.bw);
  return t;
}

const AxisLink& LinkCache::get(long long stride, int size, Stages stages) {
  stages = stages_sharing_links(p_, stages);
  const Key key{static_cast<uint64_t>(stride) * 0x100000000ULL + static_cast<uint64_t>(size),
                stages.count > 1 ? static_cast<uint64_t>(stages.stride) * 0x100000000ULL + uint64_t(stages.count) : 0};
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  return memo_.emplace(key, axis_link(p_, total_, stride, size, stages)).first->second;
}

const PairLink& LinkCache::pair(long long stride, int size) {
  uint64_t key = static_cast<uint64_t>(stride) * 0x100000000ULL + static_cast<uint64_t>(size);
  auto it = pair_memo_.find(key);
  if (it != pair_memo_.end()) return it->second;
  return pair_memo_.emplace(key, pair_link(p_, total_, stride, size)).first->second;
}

}  // namespace ff
