#include "advisor/calibration/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "advisor/calibration/elementwise_fit.hpp"
#include "advisor/calibration/least_squares.hpp"
#include "advisor/core/device_pace.hpp"  // as_written
#include "advisor/core/json_fields.hpp"
#include "advisor/model/compute_model.hpp"

namespace ff {

namespace {

constexpr double us = 1e-6, GB = 1e9, GiB = 1073741824.0, TFLOPS = 1e12;

// One timing under the ring model: t = α·steps + factor·bytes/busbw.
struct RingPoint {
  double steps = 0, factor = 0, bytes = 0, seconds = 0;
};

RingPoint ring_point(Coll op, int g, double bytes, double seconds) {
  const double steps = ring_steps(op, g);
  return {steps, steps / g, bytes, seconds};
}

// Weighted least squares in x = (α, 1/busbw): each row divided by its time,
// so the residuals are relative errors and the target is 1. Columns are
// normalised before the 2×2 normal equations, whose raw entries differ by
// 20 orders of magnitude (µs steps against GB transfers).
LinkFit fit_ring(const std::vector<RingPoint>& pts, const std::string& what) {
  if (pts.size() < 2) input_error(what + ": need at least 2 message sizes to fit α and busbw, got " + std::to_string(pts.size()));
  for (const auto& p : pts)
    if (!(p.bytes > 0) || !(p.seconds > 0) || !std::isfinite(p.bytes) || !std::isfinite(p.seconds))
      input_error(what + ": bytes and times must be > 0 (got " + std::to_string(p.bytes) + " bytes in " +
                  std::to_string(p.seconds) + " s)");
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (const auto& p : pts) {
    double u = p.steps / p.seconds, v = p.factor * p.bytes / p.seconds;
    a11 += u * u, a12 += u * v, a22 += v * v, b1 += u, b2 += v;
  }
  double su = std::sqrt(a11), sv = std::sqrt(a22);
  double r = a12 / (su * sv);  // 1 when every point has the same bytes per ring step
  if (!(1 - r * r > 1e-12))
    input_error(what + ": every point has the same bytes per ring step, which cannot separate latency from "
                "bandwidth: measure at least 2 message sizes");
  double c1 = b1 / su, c2 = b2 / sv;
  double alpha = (c1 - r * c2) / (1 - r * r) / su;
  double inv_bw = (c2 - r * c1) / (1 - r * r) / sv;
  if (alpha < 0) {  // α ≥ 0: refit the bandwidth alone
    alpha = 0;
    inv_bw = b2 / a22;
  }
  LinkFit fit;
  if (!(inv_bw > 0)) {
    // Times that do not grow with size over the sweep: the link is faster
    // than the sweep resolves (or its noise is larger than its transfers).
    // The best bandwidth measured is a lower bound (nccl-tests' busbw at
    // the size that showed it), α the latency the rest leaves: both >= 0.
    double best = 0;
    for (const auto& p : pts) best = std::max(best, p.factor * p.bytes / p.seconds);
    if (!(best > 0)) input_error(what + ": times do not grow with message size, so no positive bus bandwidth fits them");
    inv_bw = 1 / best;
    alpha = (b1 - a12 * inv_bw) / a11;  // Σu(1 − v/best) / Σu²: each v ≤ best, so α ≥ 0
    fit.note = "times do not grow with message size: busbw is the best measured (a lower bound), alpha the rest";
  }
  fit.link = {alpha, 1 / inv_bw};
  double sum = 0;
  for (const auto& p : pts) {
    double model = alpha * p.steps + p.factor * p.bytes * inv_bw;
    sum += (model - p.seconds) * (model - p.seconds) / (p.seconds * p.seconds);
  }
  fit.points = int(pts.size());
  fit.rel_rms = std::sqrt(sum / double(pts.size()));
  return fit;
}

std::string geometry_name(const Geometry& g) {
  if (g.inter)
    return "inter-node size " + std::to_string(g.size) + ", " + std::to_string(g.groups_per_node) + " groups per node" +
           (g.members_per_node > 1 ? ", " + std::to_string(g.members_per_node) + " members per node" : "") +
           (g.node_stride > 1 ? ", nodes " + std::to_string(g.node_stride) + " apart" : "");
  return "intra-node stride " + std::to_string(g.stride) + " size " + std::to_string(g.size);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string measured_source(const Measurement& m) {
  std::string s = "measured";
  if (!m.command.empty()) s += " by `" + m.command + "`";
  if (!m.host.empty()) s += " on " + m.host;
  if (!m.date.empty()) s += " at " + m.date;
  return s + " (" + m.backend + " backend, " + std::to_string(m.ranks) + (m.ranks == 1 ? " rank, " : " ranks, ") +
         std::to_string(m.gpus_per_node) + " per node)";
}

// A fitted table entry; "fit" is ours (the loader ignores it) so the profile
// says how well its numbers explain the raw data.
struct GeometryFit {
  Geometry g;
  LinkFit fit;                      // all collectives jointly
  std::set<std::string> ops;
  std::map<std::string, LinkFit> by_op;  // each collective alone, where it can be fitted
  std::map<std::string, LinkFit> nonblocking_by_op;  // each collective issued non-blocking
};

// How well a fit explains its points, and its note where it had to bound.
nlohmann::json fit_json(const LinkFit& f, const nlohmann::json& ops = nullptr) {
  nlohmann::json j = {{"rel_rms", f.rel_rms}, {"points", f.points}};
  if (!ops.is_null()) j["ops"] = ops;
  if (!f.note.empty()) j["note"] = f.note;
  return j;
}

// α and busbw of a link, with its per-collective figures scaled by
// `bw_factor` (a node's bandwidth from c groups sharing it).
// `curve`: with the measured times (a table entry: the times are of its own
// geometry, not of a node shared by several).
nlohmann::json by_op_json(const std::map<std::string, LinkFit>& by_op, double bw_factor = 1, bool curve = false) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [op, lf] : by_op) {
    j[op] = {{"alpha_us", lf.link.alpha_s / us}, {"busbw_GBps", lf.link.busbw * bw_factor / GB},
             {"fit", fit_json(lf)}};
    if (curve && !lf.curve.empty()) {
      nlohmann::json c = nlohmann::json::array();
      for (auto [bytes, s] : lf.curve) c.push_back({bytes, s / us});
      j[op]["curve"] = c;
    }
  }
  return j;
}

nlohmann::json link_json(const GeometryFit& g) {
  const LinkFit& f = g.fit;
  nlohmann::json o = nlohmann::json::array();
  for (const auto& s : g.ops) o.push_back(s);
  nlohmann::json e = {{"alpha_us", f.link.alpha_s / us},
                      {"busbw_GBps", f.link.busbw / GB},
                      {"kind", "measured"},
                      {"fit", fit_json(f, o)}};
  if (!g.by_op.empty()) e["by_op"] = by_op_json(g.by_op, 1, true);
  if (!g.nonblocking_by_op.empty()) e["nonblocking_by_op"] = by_op_json(g.nonblocking_by_op);
  return e;
}

// A link's per-collective figures, blocking and non-blocking, into `e`.
void add_by_op(nlohmann::json& e, const GeometryFit& g, double bw_factor) {
  e["by_op"] = by_op_json(g.by_op, bw_factor);
  if (!g.nonblocking_by_op.empty()) e["nonblocking_by_op"] = by_op_json(g.nonblocking_by_op, bw_factor);
}

// Each collective alone over `samples`, where at least 2 sizes allow it.
std::map<std::string, LinkFit> fit_each_op(const std::vector<CollectiveSample>& samples) {
  std::map<std::string, LinkFit> out;
  std::map<std::string, std::vector<CollectiveSample>> per_op;
  std::map<std::string, std::set<double>> sizes;
  for (const auto& s : samples) per_op[coll_name(s.op)].push_back(s), sizes[coll_name(s.op)].insert(s.bytes);
  for (const auto& [op, one] : per_op) {
    if (sizes[op].size() < 2) continue;
    LinkFit f = fit_link(one);
    std::map<double, double> at;  // bytes → median time; one sample per size
    for (const auto& s : one) at.emplace(s.bytes, s.median_s());
    f.curve.assign(at.begin(), at.end());
    out[op] = f;
  }
  return out;
}

// A table entry's identity: (stride, size, 1) inside a node, (groups_per_node,
// size, members_per_node) across nodes. Measured on nodes apart, it is another
// entry of the same identity, told apart by its rings an uplink.
using GeometryKey = std::tuple<long long, int, int>;

GeometryKey key_of(const Geometry& g) {
  return g.inter ? GeometryKey{g.groups_per_node, g.size, g.members_per_node} : GeometryKey{g.stride, g.size, 1};
}

// Every geometry's samples fitted jointly over the collectives measured on
// it: the advisor prices all three with one (α, busbw) per geometry, so the
// fit minimises the relative error of exactly the times it will predict.
std::vector<GeometryFit> fit_geometries(const Measurement& m, bool inter) {
  std::map<std::pair<GeometryKey, int>, std::vector<const CollectiveSample*>> by_geometry;
  for (const auto& c : m.collectives)
    if (c.geometry.inter == inter) by_geometry[{key_of(c.geometry), c.geometry.node_stride}].push_back(&c);
  std::vector<GeometryFit> fits;
  for (const auto& [key, samples] : by_geometry) {
    std::vector<CollectiveSample> blocking, nonblocking;
    GeometryFit gf;
    gf.g = samples.front()->geometry;
    for (const auto* s : samples) {
      if (s->nonblocking) {
        nonblocking.push_back(*s);
        continue;
      }
      blocking.push_back(*s);
      gf.ops.insert(coll_name(s->op));
    }
    if (blocking.empty())
      input_error(geometry_name(gf.g) + ": only non-blocking collectives were measured; the blocking ones on the "
                  "same geometry are needed as well");
    gf.fit = fit_link(blocking);
    // Each collective alone as well, when more than one was measured: an MPI
    // may run them at very different speeds on the same links (Open MPI's
    // reduce-scatter across nodes at a third of its all-reduce).
    // (With one collective measured, its by_op repeats the joint fit and
    // carries its curve.)
    gf.by_op = fit_each_op(blocking);
    // Non-blocking forms always apart: Open MPI runs them with other
    // algorithms (libnbc), from equal speed to several times slower.
    gf.nonblocking_by_op = fit_each_op(nonblocking);
    fits.push_back(gf);
  }
  return fits;
}

// Entries of a base table the measurement did not cover, kept with a note.
void keep_unmeasured(nlohmann::json& table, const nlohmann::json& base_section, const std::string& key,
                     const std::set<GeometryKey>& measured) {
  if (!base_section.contains("table")) return;
  for (auto e : base_section["table"]) {
    if (measured.count({e.value(key, 1LL), e.value("size", 2), e.value("members_per_node", 1)})) continue;
    if (!e.contains("kind")) e["kind"] = base_section.value("kind", "nominal");
    if (!e.contains("source")) e["source"] = "from the base profile: " + base_section.value("source", std::string("(no source)"));
    table.push_back(e);
  }
}

// A tier's table: the fitted entries, keyed by stride (intra) or
// groups_per_node and members_per_node (inter) and size, then the base's
// entries not measured.
nlohmann::json tier_table(const std::vector<GeometryFit>& fits, const nlohmann::json& base, const char* section,
                          const Measurement& m) {
  const std::string key = std::string(section) == "intra_node" ? "stride" : "groups_per_node";
  nlohmann::json table = nlohmann::json::array();
  std::set<GeometryKey> measured;
  for (const auto& f : fits) {
    nlohmann::json e = link_json(f);
    e[key] = std::get<0>(key_of(f.g));
    e["size"] = f.g.size;
    if (f.g.inter) e["members_per_node"] = f.g.members_per_node;
    if (f.g.inter && m.nodes_per_group > 0) e["rings_per_uplink"] = rings_per_uplink(f.g, m.nodes, m.nodes_per_group);
    table.push_back(e);
    measured.insert(key_of(f.g));
  }
  if (!base.is_null()) keep_unmeasured(table, base.at(section), key, measured);
  return table;
}

void fit_intra(nlohmann::json& p, const nlohmann::json& base, const Measurement& m) {
  auto fits = fit_geometries(m, false);
  if (fits.empty()) {
    if (base.is_null())
      input_error("the measurement has no intra-node collectives and there is no --base profile to take them from");
    return;  // the base's section stands
  }
  const GeometryFit* def = nullptr;  // stride 1, smallest size; else smallest stride
  for (const auto& f : fits)
    if (!def || std::make_pair(f.g.stride, f.g.size) < std::make_pair(def->g.stride, def->g.size)) def = &f;
  p["intra_node"] = {
      {"kind", "measured"},
      {"source", measured_source(m) + ". Each entry: α and busbw fitted jointly to the medians of every collective "
                 "measured on that (stride, size), least squares of relative error, α >= 0 (fit.rel_rms, fit.points); by_op: "
                 "each collective fitted alone, which the advisor uses for that collective. "
                 "default = the measured entry of stride " + std::to_string(def->g.stride) + ", size " +
                 std::to_string(def->g.size) + " (stride 1, smallest size, when measured)."},
      {"default", {{"alpha_us", def->fit.link.alpha_s / us}, {"busbw_GBps", def->fit.link.busbw / GB}}},
      {"table", tier_table(fits, base, "intra_node", m)}};
  add_by_op(p["intra_node"]["default"], *def, 1);
}

void fit_inter(nlohmann::json& p, const nlohmann::json& base, const Measurement& m,
               const std::vector<GeometryFit>& fits) {
  if (fits.empty()) {
    if (!base.is_null()) return;
    const auto& d = p["intra_node"]["default"];
    p["inter_node"] = {
        {"kind", "nominal"},
        {"source", "not measured (no cross-node collectives in the measurement): assumed equal to the intra-node "
                   "default, i.e. a single-node machine; measure across nodes before planning multi-node runs."},
        {"node_busbw_GBps", d["busbw_GBps"]},
        {"alpha_us", d["alpha_us"]},
        {"table", nlohmann::json::array()}};
    return;
  }
  // The node's own bandwidth: one group per node uses all of it; c groups
  // sharing a node each see node/c, so c·busbw estimates it otherwise. A
  // group with several members a node is not what that rule describes (an
  // MPI may send from all of them at once), so it is the last resort.
  // Preference: members_per_node 1, groups_per_node 1, then the most points,
  // then the largest size.
  auto better = [](const GeometryFit& a, const GeometryFit& b) {
    if ((a.g.members_per_node == 1) != (b.g.members_per_node == 1)) return a.g.members_per_node == 1;
    if ((a.g.groups_per_node == 1) != (b.g.groups_per_node == 1)) return a.g.groups_per_node == 1;
    if (a.fit.points != b.fit.points) return a.fit.points > b.fit.points;
    return a.g.size > b.g.size;
  };
  // On switch groups (measure --nodes-per-group), a group that leaves its
  // switch group is bounded by the uplink, not the node: the node's link is
  // fitted on the others only (MODEL.md §2, "Switch groups").
  auto crosses = [&m](const Geometry& g) { return rings_per_uplink(g, m.nodes, m.nodes_per_group) > 0; };
  const GeometryFit* node = nullptr;
  for (const auto& f : fits)
    if (!crosses(f.g) && (!node || better(f, *node))) node = &f;
  if (!node)
    input_error("--nodes-per-group " + std::to_string(m.nodes_per_group) +
                ": every cross-node geometry measured leaves its switch group, so the nodes' own link cannot be "
                "told from the uplinks'; measure one inside a switch group as well (--inter)");
  // Three or more spans of that kind measured (rings over several node
  // counts): the node's link is their joint fit (MODEL.md §2, "Rings at
  // scale"), which prices the spans not measured. Where no call cost, α and
  // busbw fit them (an MPI's algorithms are no rings), the one geometry's fit
  // stands, and the source says why.
  std::vector<CollectiveSample> kind;
  std::set<int> spans;
  for (const auto& c : m.collectives)
    if (c.geometry.inter && !c.nonblocking && c.geometry.groups_per_node == node->g.groups_per_node &&
        c.geometry.members_per_node == node->g.members_per_node && !crosses(c.geometry))
      kind.push_back(c), spans.insert(c.geometry.size);
  std::string not_at_scale;
  LinkFit rings;
  if (spans.size() >= 3) {
    try {
      rings = fit_rings_at_scale(kind);
    } catch (const InputError& e) {
      not_at_scale = std::string(" Not fitted as rings at scale: ") + e.what() + ".";
    }
  }
  if (rings.points > 0) {
    const double c = node->g.groups_per_node;
    std::string sizes;
    for (int s : spans) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
    p["inter_node"] = {
        {"kind", "measured"},
        {"source", measured_source(m) + ". Each entry fitted like intra_node's. node_busbw_GBps, alpha_us, "
                   "ll_alpha_us, ll_bw_fraction and call_us = one fit over the rings of groups_per_node " +
                       std::to_string(node->g.groups_per_node) + ", members_per_node " +
                       std::to_string(node->g.members_per_node) + " at sizes " + sizes +
                       (c == 1 ? "" : " (busbw times groups_per_node)") +
                       ": a call cost, then the faster of two protocols per ring step (MODEL.md §2, rings at scale)"},
        {"node_busbw_GBps", rings.link.busbw * c / GB},
        {"alpha_us", rings.link.alpha_s / us},
        {"ll_alpha_us", rings.link.ll_alpha_s / us},
        {"ll_bw_fraction", rings.link.ll_bw_fraction},
        {"call_us", rings.link.call_s / us},
        {"fit", fit_json(rings)},
        {"table", tier_table(fits, base, "inter_node", m)}};
    return;
  }
  p["inter_node"] = {
      {"kind", "measured"},
      {"source", measured_source(m) + ". Each entry fitted like intra_node's. node_busbw_GBps and alpha_us = the "
                 "fit of groups_per_node " + std::to_string(node->g.groups_per_node) + ", size " +
                 std::to_string(node->g.size) +
                 (node->g.members_per_node == 1 ? "" : ", members_per_node " + std::to_string(node->g.members_per_node)) +
                 (node->g.groups_per_node == 1 ? "" : ", busbw times groups_per_node") +
                 " (members_per_node 1 preferred, then groups_per_node 1, then the most points, then the largest "
                 "size)." + not_at_scale},
      {"node_busbw_GBps", node->fit.link.busbw * node->g.groups_per_node / GB},
      {"alpha_us", node->fit.link.alpha_s / us},
      {"table", tier_table(fits, base, "inter_node", m)}};
  add_by_op(p["inter_node"], *node, node->g.groups_per_node);
}

// The switch groups' uplinks (measure --nodes-per-group): the fit of a
// geometry whose groups leave their switch group, r of them sharing each
// uplink, gives the global link as r · busbw (the ring rule one tier up,
// MODEL.md §2 "Switch groups"), its α the tier's. Preference as for the node:
// one member a node, then the fewest rings an uplink, the most points, the
// largest size. Where the node's link was the slower, that is a lower bound,
// and the source says so. Without the flag a base's section stands.
void fit_switch_groups(nlohmann::json& p, const Measurement& m, const std::vector<GeometryFit>& fits) {
  if (m.nodes_per_group <= 0) return;
  const GeometryFit* best = nullptr;
  int best_r = 0;
  for (const auto& f : fits) {
    const int r = rings_per_uplink(f.g, m.nodes, m.nodes_per_group);
    if (r == 0) continue;
    auto key = [](const GeometryFit& x, int rx) {
      return std::make_tuple(x.g.members_per_node != 1, rx, -x.fit.points, -x.g.size);
    };
    if (!best || key(f, r) < key(*best, best_r)) best = &f, best_r = r;
  }
  if (!best)
    input_error("--nodes-per-group " + std::to_string(m.nodes_per_group) + ": no cross-node geometry measured on " +
                std::to_string(m.nodes) + " nodes leaves its switch group, so the uplinks were not timed; measure " +
                "one spanning more than " + std::to_string(m.nodes_per_group) + " nodes (--inter)");
  const double node_share = p["inter_node"]["node_busbw_GBps"].get<double>() / best->g.groups_per_node;
  const double busbw = best->fit.link.busbw / GB;
  p["switch_groups"] = {
      {"kind", "measured"},
      {"source", measured_source(m) + ". global_busbw_GBps and alpha_us = the fit of " + geometry_name(best->g) +
                     ", whose groups leave their switch group of " + std::to_string(m.nodes_per_group) +
                     " nodes, " + std::to_string(best_r) + " of them sharing each uplink (busbw times " +
                     std::to_string(best_r) + ")" +
                     (busbw < 0.9 * node_share ? "" : "; it ran at the node link's share or above it, so the uplink "
                                                      "may be faster than this lower bound")},
      {"nodes_per_group", m.nodes_per_group},
      {"global_busbw_GBps", best->fit.link.busbw * best_r / GB},
      {"alpha_us", best->fit.link.alpha_s / us},
      {"fit", fit_json(best->fit)}};
}

// A pair as the advisor prices it without a "p2p" section: a 2-rank
// all-gather on the same ranks, each sending its half (the same wire
// pattern): α·1 + ½·(2·bytes)/busbw = α + bytes/busbw. `e` is a link entry
// of the profile's collectives; its all-gather figures when it has them.
nlohmann::json pair_from_collective(const nlohmann::json& e, const char* busbw_key, const std::string& why) {
  double alpha = e.at("alpha_us").get<double>(), bw = e.at(busbw_key).get<double>();
  if (e.contains("by_op") && e["by_op"].contains("all-gather")) {
    alpha = e["by_op"]["all-gather"].at("alpha_us").get<double>();
    bw = e["by_op"]["all-gather"].at("busbw_GBps").get<double>();
  }
  return {{"alpha_us", alpha}, {"bw_GBps", bw}, {"kind", "nominal"},
          {"source", "not measured (" + why + "): the profile's 2-rank all-gather on the same ranks, the wire pattern "
                     "of a pair exchange (what the advisor assumes without this entry)"}};
}

// The profile's collective entry a pair of `tier` would be priced with.
nlohmann::json pair_fallback(const nlohmann::json& p, bool inter, const std::string& why) {
  if (!inter) {
    for (const auto& e : p["intra_node"].value("table", nlohmann::json::array()))
      if (e.value("stride", 0LL) == 1 && e.value("size", 0) == 2) return pair_from_collective(e, "busbw_GBps", why);
    return pair_from_collective(p["intra_node"]["default"], "busbw_GBps", why);
  }
  for (const auto& e : p["inter_node"].value("table", nlohmann::json::array()))
    if (e.value("groups_per_node", 0) == 1 && e.value("size", 0) == 2 && e.value("members_per_node", 1) == 1)
      return pair_from_collective(e, "busbw_GBps", why);
  return pair_from_collective(p["inter_node"], "node_busbw_GBps", why);
}

// Pairs: one (α, bw) per geometry, kept in "table" (the loader reads only
// intra_node and inter_node). intra_node = the smallest stride measured
// (neighbouring stages); inter_node = one pair per node, c pairs sharing a
// node reported in its source (the advisor divides bw by c).
void fit_p2p_section(nlohmann::json& p, const nlohmann::json& base, const Measurement& m) {
  if (m.p2p.empty()) return;  // the base's section stands, or there is none
  std::map<std::pair<bool, long long>, std::vector<P2PSample>> by_geometry;
  for (const auto& s : m.p2p)
    by_geometry[{s.geometry.inter, s.geometry.inter ? s.geometry.groups_per_node : s.geometry.stride}].push_back(s);
  nlohmann::json table = nlohmann::json::array();
  const std::pair<const std::pair<bool, long long>, std::vector<P2PSample>>*intra = nullptr, *inter = nullptr;
  std::map<std::pair<bool, long long>, LinkFit> fits;
  for (const auto& kv : by_geometry) {
    const auto& [key, samples] = kv;
    LinkFit f = fit_p2p(samples);
    fits[key] = f;
    nlohmann::json e = {{"tier", key.first ? "inter" : "intra"}, {"alpha_us", f.link.alpha_s / us},
                        {"bw_GBps", f.link.busbw / GB}, {"fit", fit_json(f)}};
    e[key.first ? "pairs_per_node" : "stride"] = key.second;
    table.push_back(e);
    // Map order: the smallest stride, the fewest pairs per node first.
    if (!key.first && !intra) intra = &kv;
    if (key.first && !inter) inter = &kv;
  }
  auto entry = [&](const LinkFit& f, double bw_factor, const std::string& what) {
    return nlohmann::json{{"alpha_us", f.link.alpha_s / us}, {"bw_GBps", f.link.busbw * bw_factor / GB},
                          {"kind", "measured"}, {"source", what},
                          {"fit", fit_json(f)}};
  };
  nlohmann::json s = {
      {"kind", "measured"},
      {"source", measured_source(m) + ". Pairs exchanging one message each way at once (MPI_Irecv + MPI_Isend + "
                 "MPI_Waitall, or ncclSend/ncclRecv in one group), every pair of a geometry at once; per geometry "
                 "(table) α and bw fitted to the median times, t = α + bytes/bw, least squares of relative error, "
                 "α >= 0."},
      {"table", table}};
  const nlohmann::json* base_p2p = !base.is_null() && base.contains("p2p") ? &base["p2p"] : nullptr;
  auto kept = [&](const char* key) {
    nlohmann::json e = (*base_p2p)[key];
    if (!e.contains("kind")) e["kind"] = base_p2p->value("kind", "nominal");
    if (!e.contains("source")) e["source"] = "from the base profile: " + base_p2p->value("source", std::string("(no source)"));
    return e;
  };
  if (intra) {
    s["intra_node"] = entry(fits[intra->first], 1, "stride " + std::to_string(intra->first.second) +
                                                      " (the smallest measured), every such pair of a node at once");
  } else {
    s["intra_node"] = base_p2p ? kept("intra_node") : pair_fallback(p, false, "one rank per node, no pair inside one");
  }
  if (inter) {
    long long c = inter->first.second;
    const LinkFit& f = fits[inter->first];
    std::string what = c == 1 ? "one pair per node, alone on its nodes' links"
                              : std::to_string(c) + " pairs sharing each node (one pair per node was not measured): " +
                                    "bw = " + std::to_string(c) + " × each pair's";
    for (const auto& [key, g] : fits)
      if (key.first && key.second > 1)
        what += "; " + std::to_string(key.second) + " pairs sharing a node: α " + fmt(g.link.alpha_s / us) + " µs, " +
                fmt(g.link.busbw / GB) + " GB/s each way per pair (" + fmt(g.link.busbw * double(key.second) / GB) +
                " in total; the advisor assumes bw/" + std::to_string(key.second) + " each)";
    s["inter_node"] = entry(f, double(c), what);
  } else {
    s["inter_node"] = base_p2p ? kept("inter_node") : pair_fallback(p, true, "one node, no pair across nodes");
  }
  p["p2p"] = s;
}

// The host link: t = α + bytes/bw per direction, one GPU alone and every GPU
// of a node at once. The advisor takes one figure each way for both
// directions, so each is the slower direction's.
void fit_host_section(nlohmann::json& p, const nlohmann::json& base, const Measurement& m) {
  bool base_host = !base.is_null() && base.contains("host");
  if (m.host_link.empty()) {
    if (m.host_memory_bytes > 0 && base_host) {  // the link stays the base's; the memory is this machine's
      p["host"]["memory_GiB"] = m.host_memory_bytes / GiB;
      p["host"]["source"] = measured_source(m) + ": memory_GiB (the node's RAM); the link from the base profile: " +
                            base["host"].value("source", std::string("(no source)"));
    }
    return;
  }
  std::map<std::pair<int, bool>, std::vector<HostLinkSample>> by;  // (gpus, to_device)
  for (const auto& s : m.host_link) by[{s.gpus, s.to_device}].push_back(s);
  int alone = by.begin()->first.first, all = by.rbegin()->first.first;  // fewest and most GPUs copying at once
  nlohmann::json fits = nlohmann::json::object();
  auto slower = [&](int gpus, std::string& what) {
    double bw = 0;
    for (bool h2d : {true, false}) {
      auto it = by.find({gpus, h2d});
      if (it == by.end()) continue;
      LinkFit f = fit_host_link(it->second);
      std::string name = std::string(h2d ? "h2d" : "d2h") + "_" + std::to_string(gpus) + "_gpus";
      fits[name] = {{"alpha_us", f.link.alpha_s / us}, {"bw_GBps", f.link.busbw / GB}, {"rel_rms", f.rel_rms},
                    {"points", f.points}};
      what += std::string(what.empty() ? "" : ", ") + (h2d ? "h2d " : "d2h ") + fmt(f.link.busbw / GB) + " GB/s";
      bw = bw > 0 ? std::min(bw, f.link.busbw) : f.link.busbw;
    }
    return bw;
  };
  std::string alone_what, all_what;
  double link = slower(alone, alone_what);
  double memory = m.host_memory_bytes;
  std::string memory_what = "the node's RAM (sysconf; not all of it is free for offloaded state)";
  if (!(memory > 0) && base_host) {
    memory = base["host"].at("memory_GiB").get<double>() * GiB;
    memory_what = "from the base profile";
  } else if (!(memory > 0)) {
    memory = m.memory_bytes_per_rank * m.gpus_per_node;
    memory_what = "memory per rank × ranks per node";
  }
  if (!(memory > 0)) input_error("the measurement has host-link samples but no host memory, and no --base profile gives one");
  std::string src = measured_source(m) + ": " + host_link_description(m.host_link_kind) + "; t = α + bytes/bw fitted " +
                    "per direction to the median times (fit). link_GBps = the slower direction with " +
                    std::to_string(alone) + " GPU" + (alone == 1 ? "" : "s") + " of a node copying (" + alone_what + ")";
  nlohmann::json h = {{"kind", "measured"}, {"link_GBps", link / GB}, {"memory_GiB", memory / GiB}};
  if (all > alone) {
    double each = slower(all, all_what);
    h["node_link_GBps"] = each * all / GB;
    src += "; node_link_GBps = " + std::to_string(all) + " × the slower direction with all " + std::to_string(all) +
           " GPUs of a node copying at once (" + all_what + " each)";
  }
  src += "; memory_GiB = " + memory_what + ".";
  h["source"] = src;
  h["fit"] = fits;
  p["host"] = h;
}

std::vector<double> distinct(const std::vector<GemmSample>& s, long long GemmSample::*dim) {
  std::set<double> v;
  for (const auto& x : s) v.insert(double(x.*dim));
  return {v.begin(), v.end()};
}

nlohmann::json nested(const std::vector<double>& eff, size_t nm, size_t nn, size_t nk) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < nm; ++i) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t j = 0; j < nn; ++j) {
      nlohmann::json row = nlohmann::json::array();
      for (size_t l = 0; l < nk; ++l) row.push_back(eff[(i * nn + j) * nk + l]);
      rows.push_back(row);
    }
    a.push_back(rows);
  }
  return a;
}

// The GEMM table on the measured shapes' own axes (distinct m, n, k), so a
// full factorial measurement is reproduced cell for cell. The dtype not
// measured keeps the base's table, resampled onto these axes.
void fit_gemm(nlohmann::json& p, const nlohmann::json& base, const MachineProfile* b, const Measurement& m) {
  if (m.gemm.empty()) {
    if (!b) input_error("the measurement has no GEMM samples and there is no --base profile to take them from");
    return;
  }
  double best = 0;
  for (const auto& g : m.gemm) best = std::max(best, g.flops() / g.median_s());
  const char* dt = dtype_name(m.gemm_dtype);
  // Efficiency is achieved / peak. Without a base the measured peak is the
  // peak (or the best sample when none was recorded); with one the base's
  // datasheet peak stays, unless the machine beat it.
  double peak = m.gemm_peak_flops > 0 ? m.gemm_peak_flops : best;
  std::string peak_note = m.gemm_peak_flops > 0 ? "the measured peak" : "the fastest sample (no peak was recorded)";
  if (b) {
    double base_peak = b->peak_flops(m.gemm_dtype);
    if (base_peak >= std::max(best, m.gemm_peak_flops)) {
      peak = base_peak;
      peak_note = "the base profile's peak";
    } else {
      peak = std::max(best, m.gemm_peak_flops);
      peak_note += ", which beats the base profile's " + fmt(base_peak / TFLOPS) + " TFLOP/s";
      p["compute"]["peak_tflops"][dt] = peak / TFLOPS;
      p["compute"]["kind"] = "measured";
      p["compute"]["source"] = measured_source(m) + ": peak_tflops." + dt + " raised to the measured rate; the rest " +
                               "from the base profile: " + base["compute"].value("source", std::string("(no source)"));
    }
  }
  std::vector<GemmPoint> pts;
  for (const auto& g : m.gemm)
    pts.push_back({double(g.m), double(g.n), double(g.k), std::min(1.0, g.flops() / g.median_s() / peak)});
  auto M = distinct(m.gemm, &GemmSample::m), N = distinct(m.gemm, &GemmSample::n), K = distinct(m.gemm, &GemmSample::k);
  auto eff = fit_gemm_grid(M, N, K, pts);

  nlohmann::json g = {{"kind", "measured"}, {"m", M}, {"n", N}, {"k", K}};
  g[dt] = nested(eff, M.size(), N.size(), K.size());
  std::string other = low_precision(m.gemm_dtype) ? "fp32" : "bf16";
  std::string how = measured_source(m) + ". " + dt + ": " + std::to_string(pts.size()) + " samples (" +
                    "median time; efficiency = achieved / " + peak_note + ", at most 1) placed on the grid of the " +
                    "measured dimensions; a cell with samples on it holds their mean (layouts nn, nt, tn alike), " +
                    "a cell without the inverse-distance-squared mean in log2(m, n, k) of all samples. ";
  if (b && !low_precision(m.gemm_dtype) && b->gemm_rate.efficiency_max > 0) {
    g["rate"] = base["gemm"]["rate"];
    how += "bf16: not measured; the base profile's rate kept (" + base["gemm"].value("kind", std::string("nominal")) +
           ").";
  } else if (b) {
    const GemmTable& t = b->gemm(low_precision(m.gemm_dtype) ? Dtype::FP32 : Dtype::BF16);
    std::vector<double> o;
    for (double x : M)
      for (double y : N)
        for (double z : K) o.push_back(std::clamp(gemm_efficiency(t, x, y, z), 1e-3, 1.0));
    g[other] = nested(o, M.size(), N.size(), K.size());
    how += other + ": not measured; the base profile's table interpolated onto this grid (" +
           base["gemm"].value("kind", std::string("nominal")) + ").";
  } else {
    g[other] = g[dt];
    how += other + ": not measured; assumed equal to " + dt + " (CPU BLAS has no " + other + " path of its own).";
  }
  g["source"] = how;
  p["gemm"] = g;
}

// Stated where no engine step was measured to fit it from.
constexpr const char* kElementwiseAssumed =
    "; elementwise_efficiency 0.5 (LayerNorm, GELU, optimizer loops reach half of a stream triad)";

// Without a base: a CPU-rank profile from the measurement, every number the
// measurement cannot give a stated assumption.
nlohmann::json measured_skeleton(const Measurement& m) {
  if (!(m.stream_bytes_per_s > 0) || !(m.memory_bytes_per_rank > 0) || m.gemm.empty())
    input_error("the measurement lacks " +
                std::string(m.gemm.empty() ? "GEMM samples" : m.stream_bytes_per_s > 0 ? "memory per rank" : "stream bandwidth") +
                ", which a profile without a --base profile needs (nccl-tests logs, for one, measure collectives only)");
  double peak = m.gemm_peak_flops;
  if (!(peak > 0))
    for (const auto& g : m.gemm) peak = std::max(peak, g.flops() / g.median_s());
  std::string src = measured_source(m);
  nlohmann::json p;
  p["compute"] = {
      {"kind", "measured"},
      {"source", src + ": peak_tflops = the measured GEMM peak for both dtypes (CPU ranks have one GEMM path); "
                 "attention_efficiency 0.3 is an assumption (attention is small, batched GEMMs plus a softmax), "
                 "not measured."},
      {"peak_tflops", {{"bf16", peak / TFLOPS}, {"fp32", peak / TFLOPS}}},
      {"attention_efficiency", 0.3}};
  double cap = m.memory_bytes_per_rank / GiB;
  p["memory"] = {
      {"kind", "measured"},
      {"source", src + ": hbm_GBps = the stream bandwidth per rank with every rank of the node running; capacity_GiB "
                 "= node memory / ranks per node. Assumptions, not measured: reserve_GiB = 10% of capacity (MPI buffers, "
                 "the OS, the allocator)" + std::string(m.engine_steps.empty() ? kElementwiseAssumed : "") + "."},
      {"hbm_GBps", m.stream_bytes_per_s / GB},
      {"elementwise_efficiency", 0.5},
      {"capacity_GiB", cap},
      {"reserve_GiB", 0.1 * cap}};
  p["overlap"] = {
      {"kind", "nominal"},
      {"source", "Assumed 0: on CPU ranks a collective progresses only while its rank drives it, so compute hides "
                 "none of it unless a core is free (MODEL.md §2); not measured."},
      {"efficiency", 0.0}};
  return p;
}

std::string describe(const Measurement& m) {
  std::string d = "calibrated from " + m.backend + " measurements";
  if (!m.host.empty()) d += " on " + m.host;
  if (!m.date.empty()) d += " (" + m.date + ")";
  return d;
}

// With a base: what the measurement says of memory replaces the base's figures.
void measured_memory(nlohmann::json& mem, const Measurement& m) {
  std::vector<std::string> measured;
  if (m.stream_bytes_per_s > 0) {
    mem["hbm_GBps"] = m.stream_bytes_per_s / GB;
    measured.push_back(m.backend == "nccl" ? "hbm_GBps (a device-to-device copy's read + write rate)"
                                           : "hbm_GBps (stream bandwidth per rank)");
  }
  if (m.memory_bytes_per_rank > 0) {
    double cap = m.memory_bytes_per_rank / GiB;
    mem["capacity_GiB"] = cap;
    measured.push_back(m.backend == "nccl" ? "capacity_GiB (the GPU's memory)"
                                           : "capacity_GiB (node memory / ranks per node)");
    if (mem.value("reserve_GiB", 0.0) >= cap) {
      mem["reserve_GiB"] = 0.1 * cap;
      measured.push_back("reserve_GiB lowered to 10% of capacity (an assumption)");
    }
  }
  if (measured.empty()) return;
  std::string what;
  for (const auto& x : measured) what += (what.empty() ? "" : ", ") + x;
  mem["source"] = measured_source(m) + ": " + what + "; the rest from the base profile: " +
                  mem.value("source", std::string("(no source)"));
  mem["kind"] = "measured";
}

// The engine's own step, timed by measure, replaces the assumed element-wise
// efficiency; the rest of the profile (GEMM table, stream bandwidth) must be
// in place first, since the fit is of what they leave unexplained.
void fit_elementwise_section(nlohmann::json& p, const Measurement& m, const std::string& name) {
  ElementwiseFit f = fit_elementwise(machine_from_json(p, "calibrated profile " + name), m.engine_steps);
  nlohmann::json& mem = p["memory"];
  std::string steps;
  for (const auto& e : m.engine_steps)
    steps += (steps.empty() ? "" : ", ") + e.model.name + " micro-batch " + std::to_string(e.micro_batch);
  if (!f.ok) {
    mem["source"] = mem.value("source", std::string("")) + " elementwise_efficiency " + fmt(mem.value("elementwise_efficiency", 0.0)) +
                    " is assumed, not fitted to the engine step (" +
                    steps + "): " + f.why + ".";
    return;
  }
  mem["elementwise_efficiency"] = f.efficiency;
  mem["source"] = mem.value("source", std::string("")) + " elementwise_efficiency " + fmt(f.efficiency) +
                  " is fitted, not assumed: the model's compute time of the engine's own training step (" + steps +
                  "; one rank's replica on each rank, every rank at once, median step after the first) equals the " +
                  "measured " + fmt(f.measured_s * 1e3) + " ms" +
                  (f.clamped ? " as nearly as the bound [0.001, 1] allows (" + fmt(f.predicted_s * 1e3) + " ms)" : "") +
                  ", given the GEMM table and attention above.";
  mem["kind"] = "measured";
}

// The class a memory-bound kernel `measure` times is priced as (MODEL.md
// §2, "Kernels"); none for the bias add, which the engine runs as a GEMM
// epilogue wherever it can.
const char* measured_kernel_class(const std::string& kernel) {
  if (kernel == "residual add") return "residual";
  if (kernel == "gelu forward" || kernel == "gelu backward") return "activation";
  if (kernel == "bias gradient") return "bias";
  if (kernel == "norm forward" || kernel == "norm backward") return "norm";
  if (kernel == "adamw") return "optimizer";
  return nullptr;
}

// A class's kernels as `seconds = bytes · a_kernel + launch_s`: a rate of
// each kernel's own (GELU's two ways differ) and one cost a launch, least
// squares in relative error; the class's rate is its kernels' largest
// timings' bytes over that fit's time for them. Where a kernel has one size
// (or the launch comes out negative): launch_s 0, the rate all their bytes
// over all their time.
struct ClassPoint {
  std::string kernel;
  double bytes = 0, seconds = 0;
};
struct ClassFit {
  double bytes_per_s = 0, launch_s = 0;
};
ClassFit fit_class(const std::vector<ClassPoint>& points) {
  std::vector<std::string> kernels;
  std::map<std::string, double> largest;
  double bytes = 0, seconds = 0;
  for (const ClassPoint& q : points) {
    if (!largest.count(q.kernel)) kernels.push_back(q.kernel);
    largest[q.kernel] = std::max(largest[q.kernel], q.bytes);
    bytes += q.bytes, seconds += q.seconds;
  }
  std::vector<std::vector<double>> rows;
  for (const ClassPoint& q : points) {
    std::vector<double> row(kernels.size() + 1, 0.0);
    row[size_t(std::find(kernels.begin(), kernels.end(), q.kernel) - kernels.begin())] = q.bytes / q.seconds;
    row.back() = 1 / q.seconds;
    rows.push_back(row);
  }
  std::vector<double> x;
  const bool fitted = relative_least_squares(rows, x) && x.back() >= 0 &&
                      std::all_of(x.begin(), x.end() - 1, [](double a) { return a > 0; });
  if (!fitted) return {bytes / seconds, 0};
  double at_largest = 0, their_time = 0;
  for (size_t k = 0; k < kernels.size(); ++k)
    at_largest += largest[kernels[k]], their_time += x[k] * largest[kernels[k]];
  return {at_largest / their_time, x.back()};
}

// The engine's own kernels, timed alone on this GPU (measure --model with
// the nccl backend), replace what the profile assumed of everything but
// the GEMMs: the causal flash-attention curve at each head size timed
// (rates at the engine level's FLOP count, of the bf16 peak above), the
// element-wise efficiency (the median memory-bound kernel's bytes per
// second over the device copy's) and each class's own, the launch cost,
// and the slowdown of compute under a collective, by proxy.
void fit_gpu_kernels_section(nlohmann::json& p, const Measurement& m) {
  const std::string src = measured_source(m);
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> attention;  // head_dim: S, rate
  std::vector<double> bandwidth;
  std::map<std::string, double> largest;  // kernel: its largest timing's bytes (the model's own size)
  for (const GpuKernelSample& k : m.gpu_kernels) largest[k.kernel] = std::max(largest[k.kernel], k.bytes);
  std::map<std::string, std::vector<ClassPoint>> by_class;
  for (const GpuKernelSample& k : m.gpu_kernels) {
    const double t = k.median_s();
    if (!(t > 0)) continue;
    if (k.kernel == "flash_attention") {
      attention[k.head_dim].first.push_back(k.seq);
      attention[k.head_dim].second.push_back(k.flops / t);
    } else {
      if (k.bytes == largest[k.kernel]) bandwidth.push_back(k.bytes / t);
      if (const char* c = measured_kernel_class(k.kernel)) by_class[c].push_back({k.kernel, k.bytes, t});
    }
  }
  nlohmann::json& compute = p["compute"];
  const double peak = compute["peak_tflops"].value("bf16", 0.0) * TFLOPS;
  for (const auto& [head_dim, points] : attention) {
    const AttentionCurve c = fit_attention_curve(points.first, points.second, peak, head_dim, true);
    nlohmann::json& fa = compute["flash_attention"];
    nlohmann::json curves = nlohmann::json::array();
    for (const auto& old : fa.value("curves", nlohmann::json::array()))
      if (!(old.value("head_dim", 0) == head_dim && old.value("causal", false))) curves.push_back(old);
    curves.push_back({{"head_dim", head_dim}, {"causal", true}, {"efficiency_max", c.efficiency_max},
                      {"half_seq", c.half_seq}});
    std::string lengths;
    for (double s : points.first) lengths += (lengths.empty() ? "" : ", ") + fmt(s);
    fa["curves"] = curves;
    fa["source"] = src + ": the causal curve at head_dim " + std::to_string(head_dim) +
                   " fitted on the engine's own flash attention (bf16, forward + backward at " + lengths +
                   " tokens, FLOPs at the engine level's count: backward 3.5 x forward); the other curves " +
                   fa.value("source", std::string("from the base"));
    fa["kind"] = "measured";
  }
  if (!bandwidth.empty()) {
    nlohmann::json& mem = p["memory"];
    const double hbm = mem.value("hbm_GBps", 0.0) * GB;
    if (hbm > 0) {
      const double eff = std::min(1.0, median(bandwidth) / hbm);
      mem["elementwise_efficiency"] = eff;
      mem["source"] = mem.value("source", std::string("")) + " elementwise_efficiency " + fmt(eff) +
                      " measured: the median of the engine's own memory-bound kernels (a block's residual add, GELU "
                      "each way, bias add and gradient, the norm each way, AdamW; bf16, the model's sizes), timed "
                      "alone, over the device copy; elementwise_by_class: each class's time = bytes / (copy · "
                      "efficiency) + launch_us, fitted on its kernels at the model's tokens and a quarter of them.";
      nlohmann::json classes = nlohmann::json::object();
      for (const auto& [c, points] : by_class) {
        const ClassFit f = fit_class(points);
        classes[c] = {{"efficiency", std::min(1.0, f.bytes_per_s / hbm)}};
        if (f.launch_s > 0) classes[c]["launch_us"] = f.launch_s * 1e6;
      }
      if (!classes.empty()) mem["elementwise_by_class"] = classes;
    }
  }
  if (m.launch_s > 0) compute["launch_us"] = m.launch_s * 1e6;
  if (!m.hiding.empty()) {
    // A collective's kernels take SMs (and bandwidth) from the compute it
    // hides under; on one GPU, blocks on as many SMs as NCCL's channels,
    // copying or only holding them, stand in for them: the mean over all.
    double sum = 0;
    std::string each;
    for (const HidingSample& h : m.hiding) {
      sum += h.slowdown();
      each += (each.empty() ? "" : ", ") + fmt(100 * h.slowdown()) + "% beside " + std::to_string(h.blocks) +
              (h.copying ? " SMs copying" : " SMs held");
    }
    const double slowdown = std::clamp(sum / double(m.hiding.size()), 0.0, 0.95);
    const HidingSample& h = m.hiding.front();
    nlohmann::json& ov = p["overlap"];
    ov["compute_slowdown"] = slowdown;
    ov["source"] = ov.value("source", std::string("")) + " This profile's compute_slowdown, " + fmt(slowdown) +
                   ", is measured instead (" + src + "), a proxy on one GPU: a bf16 GEMM " + fmt(h.m) + "x" + fmt(h.n) +
                   "x" + fmt(h.k) +
                   " timed alone and beside blocks on a collective's channels of SMs, copying at full speed (a "
                   "collective over NVLink) or only holding them (one waiting on the network): " + each +
                   "; their mean; not a collective's own kernels.";
  }
}

// How far the figures are known (MODEL.md §8, "Ranges"): per kind of term,
// the 90th percentile of the repeats' deviation from their point's median
// (a curve prices a measured point at that median), never below the error
// assumed without it, since a spread is noise, not the model's error; a kind
// not measured keeps the base's stated error (its figures are the base's),
// else the assumed one. Across nodes the figures hold up to the widest group
// measured; beyond, the assumed error for groups spanning more.
nlohmann::json measured_uncertainty(const Measurement& m, const nlohmann::json& base) {
  const Uncertainty assumed;
  const nlohmann::json stated =
      base.is_object() && base.contains("uncertainty") ? base["uncertainty"] : nlohmann::json::object();
  struct Spread {
    bool measured = false;
    std::vector<double> d;  // each repeat's |t / median − 1|, points with 2 or more repeats
  } gemm, intra, inter;
  int widest = 0;  // the most nodes one measured group spans
  auto add = [](Spread& into, const std::vector<double>& times) {
    into.measured = true;
    if (times.size() < 2) return;
    const double mid = median(times);
    for (double t : times) into.d.push_back(std::abs(t / mid - 1));
  };
  for (const auto& s : m.gemm) add(gemm, s.times_s);
  for (const auto& c : m.collectives) {
    add(c.geometry.inter ? inter : intra, c.times_s);
    if (c.geometry.inter) widest = std::max(widest, c.geometry.size / std::max(1, c.geometry.members_per_node));
  }
  auto error = [&stated](Spread s, double floor, std::string& why, const char* kind, const char* key) {
    why += why.empty() ? "" : "; ";
    if (!s.measured && stated.contains(key)) {
      why += std::string(kind) + " not measured: the base's stated error";
      return stated[key].get<double>();
    }
    std::vector<double>& d = s.d;
    if (d.empty()) {
      why += std::string(kind) + (s.measured ? " timed once a point: assumed" : " not measured: assumed");
      return floor;
    }
    std::sort(d.begin(), d.end());
    const double p90 = d[size_t(0.9 * double(d.size() - 1))];
    why += std::string(kind) + " repeats within " + std::to_string(std::lround(100 * p90)) +
           "% of their median (p90, " +
           std::to_string(d.size()) + " timings)" + (p90 < floor ? ", below the assumed error" : "");
    return std::max(floor, std::min(p90, 0.99));
  };
  std::string why;
  nlohmann::json u = {{"compute", error(gemm, assumed.compute, why, "GEMMs", "compute")},
                      {"intra", error(intra, assumed.intra, why, "intra-node collectives", "intra")},
                      {"inter", error(inter, assumed.inter, why, "inter-node collectives", "inter")}};
  if (inter.measured) {
    u["checked_nodes"] = widest;
    u["beyond"] = std::max(assumed.beyond, u["inter"].get<double>());
  } else {
    for (const char* k : {"checked_nodes", "beyond"})
      if (stated.contains(k)) u[k] = stated[k];
  }
  u["kind"] = "measured";
  u["source"] = measured_source(m) + ". Each error measured: the larger of the spread and the one assumed without it "
                "(compute 10%, intra 15%, inter 20%; beyond the widest group measured 30%): " + why;
  return u;
}

nlohmann::json calibrate(const nlohmann::json& base, const Measurement& m, const std::string& name) {
  if (m.gpus_per_node < 1) input_error("measurement: gpus_per_node must be >= 1");
  MachineProfile base_profile;
  const MachineProfile* b = nullptr;
  nlohmann::json p;
  if (!base.is_null()) {
    base_profile = machine_from_json(base, "base profile");
    b = &base_profile;
    p = base;
    p.erase("raw");  // the base's own measurement no longer describes this profile
    // Nor do the errors the base's figures were checked to, where measured
    // (measured_uncertainty).
    p.erase("uncertainty");
    p["description"] = describe(m) + "; unmeasured sections from " + base.value("name", std::string("the base")) +
                       ": " + base.value("description", std::string(""));
  } else {
    p = measured_skeleton(m);
    p["description"] = describe(m) + " (CPU ranks)";
  }
  p["name"] = name;
  // The placement the geometries were measured under: one rank measured a
  // node of one GPU, whose host memory is that GPU's alone.
  p["gpus_per_node"] = m.gpus_per_node;
  if (b) measured_memory(p["memory"], m);
  fit_intra(p, base, m);
  const auto inter_fits = fit_geometries(m, true);  // the node's link, its table and the uplinks
  fit_inter(p, base, m, inter_fits);
  fit_switch_groups(p, m, inter_fits);
  fit_p2p_section(p, base, m);
  fit_host_section(p, base, m);
  fit_gemm(p, base, b, m);
  if (!m.engine_steps.empty()) fit_elementwise_section(p, m, name);
  if (!m.gpu_kernels.empty() || m.launch_s > 0 || !m.hiding.empty()) fit_gpu_kernels_section(p, m);
  // How the links were waited for: a paced validation (advisor validate
  // --device paced) needs them measured with its engine's Δ; and whether
  // each operation followed idle time. A base's do not describe this
  // measurement.
  p.erase("poll_us");
  if (m.poll_s) p["poll_us"] = as_written(*m.poll_s * 1e6);
  p.erase("gap_us");
  if (m.gap_s) p["gap_us"] = as_written(*m.gap_s * 1e6);
  // Measured with NCCL: the ranks had NVIDIA GPUs, where the engine runs its
  // cuda device. Otherwise the base's (or none: the cpu device).
  if (m.backend == "nccl") p["engine_device"] = "cuda";
  p["uncertainty"] = measured_uncertainty(m, base);
  p["raw"] = to_json(m);
  try {
    machine_from_json(p, "calibrated profile " + name);
  } catch (const InputError& e) {
    input_error(std::string("calibration produced a profile the advisor cannot load (a bug or an unusable "
                            "measurement): ") + e.what());
  }
  return p;
}

}  // namespace

LinkFit fit_link(Coll op, int group_size, const std::vector<double>& bytes, const std::vector<double>& seconds) {
  std::string what = std::string(coll_name(op)) + " fit, group of " + std::to_string(group_size);
  if (group_size < 2) input_error(what + ": a group of fewer than 2 ranks uses no link");
  if (bytes.size() != seconds.size())
    input_error(what + ": " + std::to_string(bytes.size()) + " sizes but " + std::to_string(seconds.size()) + " times");
  std::vector<RingPoint> pts;
  for (size_t i = 0; i < bytes.size(); ++i) pts.push_back(ring_point(op, group_size, bytes[i], seconds[i]));
  return fit_ring(pts, what);
}

LinkFit fit_link(const std::vector<CollectiveSample>& samples) {
  if (samples.empty()) input_error("collective fit: no samples");
  const Geometry& g = samples.front().geometry;
  std::string what = geometry_name(g) + " fit";
  if (g.size < 2) input_error(what + ": a group of fewer than 2 ranks uses no link");
  std::vector<RingPoint> pts;
  for (const auto& s : samples) pts.push_back(ring_point(s.op, s.geometry.size, s.bytes, s.median_s()));
  return fit_ring(pts, what);
}

LinkFit fit_rings_at_scale(const std::vector<CollectiveSample>& samples) {
  std::set<int> spans;
  for (const auto& s : samples) {
    if (s.geometry.size < 2) input_error("rings at scale: a group of fewer than 2 ranks uses no link");
    spans.insert(s.geometry.size);
  }
  const std::string what = "rings at scale over " + std::to_string(spans.size()) + " spans";
  if (samples.size() < 3) input_error(what + ": need at least 3 points to fit a call cost, α and busbw");
  if (spans.size() < 2) input_error("rings at scale: every sample has one group size; measure several spans");
  // Each split of the points by chunk (bytes per rank; at or below it, LL)
  // makes the model linear in x = (call, α, α_LL, 1/busbw, 1/busbw_LL), LL's
  // bandwidth its own unknown where at least 3 points run LL, else half the
  // link's (so α_LL is never fitted on fewer points than it moves); a split
  // with no LL point drops both. Each candidate is scored as the advisor
  // prices it.
  std::vector<double> splits = {0};
  for (const auto& s : samples) splits.push_back(s.bytes / s.geometry.size);
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  LinkFit best;
  for (double split : splits) {
    int ll_points = 0;
    for (const auto& s : samples) ll_points += s.bytes / s.geometry.size <= split;
    for (const bool own_ll_bw : {false, true}) {
      if (own_ll_bw && ll_points < 3) continue;
      std::vector<std::vector<double>> rows;
      for (const auto& s : samples) {
        const RingPoint p = ring_point(s.op, s.geometry.size, s.bytes, s.median_s());
        const bool ll = s.bytes / s.geometry.size <= split;
        const double wire = p.factor * p.bytes;
        std::vector<double> row = {1, ll ? 0 : p.steps};
        if (ll_points > 0) row.push_back(ll ? p.steps : 0);
        if (own_ll_bw)
          row.insert(row.end(), {ll ? 0 : wire, ll ? wire : 0});
        else
          row.push_back((ll ? 2 : 1) * wire);
        for (double& v : row) v /= p.seconds;
        rows.push_back(std::move(row));
      }
      std::vector<double> x;
      if (!relative_least_squares(rows, x)) continue;
      LinkParams l;
      l.call_s = std::max(0.0, x[0]), l.alpha_s = x[1];
      l.ll_alpha_s = ll_points > 0 ? x[2] : 0;
      const double inv_bw = own_ll_bw ? x[3] : x.back();
      if (own_ll_bw) l.ll_bw_fraction = inv_bw / x.back();  // β_LL/β; refused below unless in (0, 1]
      if (!(l.alpha_s > 0) || !(inv_bw > 0)) continue;
      if (ll_points > 0 && !(l.ll_alpha_s > 0 && l.ll_alpha_s < l.alpha_s)) continue;
      if (!(l.ll_bw_fraction > 0 && l.ll_bw_fraction <= 1)) continue;
      l.busbw = 1 / inv_bw;
      double sum = 0;
      for (const auto& s : samples) {
        const double e = collective_time(s.op, s.geometry.size, s.bytes, l) / s.median_s() - 1;
        sum += e * e;
      }
      const double rms = std::sqrt(sum / double(samples.size()));
      if (best.points == 0 || rms < best.rel_rms) best.link = l, best.points = int(samples.size()), best.rel_rms = rms;
    }
  }
  if (best.points == 0)
    input_error(what + ": no positive call cost, α and busbw fit these times (do they grow with size and span?)");
  return best;
}

AttentionCurve fit_attention_curve(const std::vector<double>& seq, const std::vector<double>& flops_per_s,
                                   double peak_flops, int head_dim, bool causal) {
  const std::string what = "flash-attention curve (head_dim " + std::to_string(head_dim) + ")";
  if (seq.size() != flops_per_s.size() || seq.size() < 2)
    input_error(what + ": need a rate at each of at least 2 sequence lengths");
  if (!(peak_flops > 0)) input_error(what + ": the peak must be > 0");
  // 1/rate = a + b·(1/S), each row divided by 1/rate: residuals relative
  // (to first order, the rate's relative error).
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (!(seq[i] > 0) || !(flops_per_s[i] > 0) || !std::isfinite(seq[i]) || !std::isfinite(flops_per_s[i]))
      input_error(what + ": lengths and rates must be > 0");
    rows.push_back({flops_per_s[i], flops_per_s[i] / seq[i]});
  }
  std::vector<double> x;
  if (!relative_least_squares(rows, x)) input_error(what + ": the lengths must differ");
  const double a = x[0], b = x[1];
  if (!(a > 0) || !(b >= 0)) input_error(what + ": the rates fit no curve that rises to a limit with length");
  AttentionCurve c;
  c.head_dim = head_dim, c.causal = causal;
  c.efficiency_max = 1 / a / peak_flops;
  c.half_seq = b / a;
  if (!(c.efficiency_max <= 1)) input_error(what + ": the fitted limit is above the peak");
  return c;
}

GemmRate fit_gemm_rate(const std::vector<GemmRatePoint>& points) {
  if (points.size() < 2) input_error("GEMM rate: need rates at 2 or more shapes");
  // t = u·(2mnk/peak) + fixed with u = 1/efficiency_max: each row divided
  // by the measured t, so the residuals are relative.
  std::vector<std::vector<double>> rows;
  for (const GemmRatePoint& q : points) {
    const double flops = 2 * q.m * q.n * q.k;
    if (!(flops > 0) || !(q.flops_per_s > 0) || !(q.peak_flops > 0) || !std::isfinite(flops))
      input_error("GEMM rate: shapes, rates and peaks must be > 0");
    const double t = flops / q.flops_per_s;
    rows.push_back({flops / q.peak_flops / t, 1 / t});
  }
  std::vector<double> x;
  if (!relative_least_squares(rows, x)) input_error("GEMM rate: the shapes must differ in size");
  GemmRate r;
  if (x[1] < 0) {  // no fixed part: the efficiency alone, t = u·(2mnk/peak)
    rows = {};
    for (const GemmRatePoint& q : points) rows.push_back({q.flops_per_s / q.peak_flops});
    if (!relative_least_squares(rows, x)) input_error("GEMM rate: no rates");
    x.push_back(0);
  }
  r.efficiency_max = 1 / x[0];
  r.fixed_s = x[1];
  if (!(r.efficiency_max > 0 && r.efficiency_max <= 1))
    input_error("GEMM rate: the fitted efficiency " + std::to_string(r.efficiency_max) + " is not in (0, 1]");
  return r;
}

LinkFit fit_p2p(const std::vector<P2PSample>& samples) {
  if (samples.empty()) input_error("pair fit: no samples");
  const Geometry& g = samples.front().geometry;
  std::string what = g.inter ? "pairs across nodes, " + std::to_string(g.groups_per_node) + " per node, fit"
                             : "pairs inside a node, stride " + std::to_string(g.stride) + ", fit";
  std::vector<RingPoint> pts;
  for (const auto& s : samples) pts.push_back({1, 1, s.bytes, s.median_s()});
  return fit_ring(pts, what);
}

LinkFit fit_host_link(const std::vector<HostLinkSample>& samples) {
  if (samples.empty()) input_error("host-link fit: no samples");
  const HostLinkSample& h = samples.front();
  std::string what = std::string("host link ") + (h.to_device ? "h2d" : "d2h") + ", " + std::to_string(h.gpus) +
                     " GPUs copying at once, fit";
  std::vector<RingPoint> pts;
  for (const auto& s : samples) pts.push_back({1, 1, s.bytes, s.median_s()});
  return fit_ring(pts, what);
}

std::vector<double> fit_gemm_grid(const std::vector<double>& M, const std::vector<double>& N,
                                  const std::vector<double>& K, const std::vector<GemmPoint>& points) {
  if (points.empty()) input_error("GEMM fit: no samples");
  std::vector<double> eff;
  for (double m : M)
    for (double n : N)
      for (double k : K) {
        double on_sum = 0, w_sum = 0, wx_sum = 0;
        int on = 0;
        for (const auto& p : points) {
          double dm = std::log2(p.m / m), dn = std::log2(p.n / n), dk = std::log2(p.k / k);
          double d2 = dm * dm + dn * dn + dk * dk;
          if (d2 < 1e-18) {
            on_sum += p.eff, ++on;
            continue;
          }
          w_sum += 1 / d2, wx_sum += p.eff / d2;
        }
        double e = on ? on_sum / on : wx_sum / w_sum;
        eff.push_back(std::clamp(e, 1e-3, 1.0));
      }
  return eff;
}

namespace {

void collect_fit_notes(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) collect_fit_notes(j[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) {
    if (k == "fit" && v.is_object() && v.contains("note") && v["note"].is_string())
      out.push_back(path + ": " + v["note"].get<std::string>());
    else if (k != "raw")  // the measurement record kept in the profile
      collect_fit_notes(v, path.empty() ? k : path + "." + k, out);
  }
}

}  // namespace

std::vector<std::string> fit_notes(const nlohmann::json& profile) {
  std::vector<std::string> out;
  collect_fit_notes(profile, "", out);
  return out;
}

nlohmann::json calibrate_profile(const nlohmann::json& base, const Measurement& m, const std::string& name) {
  // A base that loads may still hold odd extras ("source": 5); say so, not crash.
  try {
    return calibrate(base, m, name);
  } catch (const nlohmann::json::exception& e) {
    input_error(std::string("base profile: unexpected content: ") + e.what());
  }
}

nlohmann::json profile_json(const std::string& name_or_file) {
  std::string origin;
  nlohmann::json j = machine_json(name_or_file, origin);
  machine_from_json(j, origin);  // a base must be a valid profile itself
  return j;
}

}  // namespace ff
