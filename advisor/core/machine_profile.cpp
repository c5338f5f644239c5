#include "advisor/core/machine_profile.hpp"

#include <filesystem>

#include "advisor/core/bundled_profiles.hpp"
#include "advisor/core/collective.hpp"  // padded_times
#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

constexpr double GB = 1e9, GiB = 1073741824.0, us = 1e-6, TFLOPS = 1e12;

const char* const kOpNames[3] = {"all-reduce", "all-gather", "reduce-scatter"};  // Coll order

// Every figure within [1e-9, 1e9] of its file's unit (GB/s, TFLOP/s, GiB,
// µs), every efficiency above 1e-6: far beyond any machine either way, and
// what the cost model divides, multiplies (a what-if scales by 100) and sums
// stays finite and above zero; 1e300 TFLOP/s would price a step at 0 s.
constexpr double kLowest = 1e-9, kHighest = 1e9, kLeastEfficiency = 1e-6;

double figure(const Fields& f, const std::string& key, double unit) {
  double v = f.number(key);
  if (!(v >= kLowest && v <= kHighest)) f.fail(key, "a number from 1e-09 to 1e+09");
  return v * unit;
}

double efficiency(const Fields& f, const std::string& key) {
  double v = f.fraction(key);
  if (!(v >= kLeastEfficiency)) f.fail(key, "a number from 1e-06 to 1");
  return v;
}

// A section's own fields plus what documents it: where its numbers came
// from (kind, source, base_source after a refit), its fit and notes.
std::vector<const char*> documented(std::vector<const char*> fields) {
  for (const char* d : {"kind", "base_source", "note", "fit"}) fields.push_back(d);
  return fields;
}

// A latency: a negative one would price a collective below nothing.
double alpha_from(const Fields& f) {
  double a = f.number("alpha_us");
  if (a < 0 || a > kHighest) f.fail("alpha_us", "a number from 0 to 1e+09");
  return a * us;
}

// {"all-reduce": {"alpha_us", "busbw_GBps"}, ...} under `key`, where present.
// "curve": [[bytes, µs], ...], bytes ascending, both > 0.
std::shared_ptr<const MeasuredCurve> curve_from(const Fields& op, double alpha_s, double busbw) {
  if (!op.has("curve")) return nullptr;
  auto c = std::make_shared<MeasuredCurve>();
  for (const auto& point : op.array("curve")) {
    const bool ok = point.is_array() && point.size() == 2 && point[0].is_number() && point[1].is_number() &&
                    point[0].get<double>() > 0 && point[1].get<double>() > 0 &&
                    (c->bytes.empty() || point[0].get<double>() > c->bytes.back());
    if (!ok) op.fail("curve", "[bytes, microseconds] pairs, both > 0, bytes ascending");
    c->bytes.push_back(point[0].get<double>());
    c->seconds.push_back(point[1].get<double>() * 1e-6);
  }
  if (c->bytes.size() < 2) op.fail("curve", "at least 2 [bytes, microseconds] pairs");
  c->seconds = padded_times(std::move(c->seconds));
  c->alpha_s = alpha_s, c->busbw = busbw;
  return c;
}

void ops_from(const Fields& f, const char* key, std::array<bool, 3>& given, std::array<double, 3>& alpha,
              std::array<double, 3>& busbw, std::array<std::shared_ptr<const MeasuredCurve>, 3>* curves = nullptr) {
  if (!f.has(key)) return;
  Fields ops = f.object(key);
  ops.only({kOpNames[0], kOpNames[1], kOpNames[2]});
  for (int k = 0; k < 3; ++k)
    if (ops.has(kOpNames[k])) {
      Fields op = ops.object(kOpNames[k]);
      op.only(documented({"alpha_us", "busbw_GBps", "curve"}));
      given[k] = true;
      alpha[k] = alpha_from(op);
      busbw[k] = figure(op, "busbw_GBps", GB);
      if (curves) (*curves)[k] = curve_from(op, alpha[k], busbw[k]);
    }
}

// `busbw_key`: "busbw_GBps", or a node's "node_busbw_GBps"; `more`: the
// fields of where the link sits (a table entry's geometry, the node's table).
LinkParams link_from(const Fields& f, const char* busbw_key = "busbw_GBps", std::vector<const char*> more = {}) {
  for (const char* k : {"alpha_us", "by_op", "nonblocking_by_op", "call_us", "ll_alpha_us", "ll_bw_fraction"})
    more.push_back(k);
  more.push_back(busbw_key);
  f.only(documented(more));
  LinkParams l;
  l.alpha_s = alpha_from(f);
  l.busbw = figure(f, busbw_key, GB);
  ops_from(f, "by_op", l.by_op, l.op_alpha_s, l.op_busbw, &l.curve);
  ops_from(f, "nonblocking_by_op", l.nb_by_op, l.nb_alpha_s, l.nb_busbw);
  for (auto [key, value] : {std::pair{"call_us", &l.call_s}, {"ll_alpha_us", &l.ll_alpha_s}}) {
    const double v = f.number_or(key, 0);
    if (!(v >= 0 && v <= kHighest)) f.fail(key, "a number from 0 to 1e+09");
    *value = v * us;
  }
  l.ll_bw_fraction = f.number_or("ll_bw_fraction", 0.5);
  if (!(l.ll_bw_fraction > 0 && l.ll_bw_fraction <= 1)) f.fail("ll_bw_fraction", "a number above 0, at most 1");
  return l;
}

P2PLink p2p_from(const Fields& f) {
  f.only(documented({"alpha_us", "bw_GBps"}));
  return {alpha_from(f), figure(f, "bw_GBps", GB)};
}

std::vector<double> ascending(const Fields& f, const std::string& key) {
  std::vector<double> v;
  for (const auto& x : f.array(key)) {
    if (!x.is_number() || !(x.get<double>() >= 1) || (!v.empty() && x.get<double>() <= v.back()))
      f.fail(key, "an ascending array of dimensions >= 1");
    v.push_back(x.get<double>());
  }
  if (v.empty()) f.fail(key, "a non-empty array");
  return v;
}

std::vector<double> eff_table(const Fields& f, const std::string& key, size_t nm, size_t nn, size_t nk) {
  std::string shape = std::to_string(nm) + "x" + std::to_string(nn) + "x" + std::to_string(nk);
  std::string expected = "a " + shape + " nested array [m][n][k] of efficiencies from 1e-06 to 1";
  const auto& a = f.array(key);
  std::vector<double> eff;
  if (a.size() != nm) f.fail(key, expected);
  for (const auto& rows : a) {
    if (!rows.is_array() || rows.size() != nn) f.fail(key, expected);
    for (const auto& row : rows) {
      if (!row.is_array() || row.size() != nk) f.fail(key, expected);
      for (const auto& e : row) {
        if (!e.is_number() || !(e.get<double>() >= kLeastEfficiency && e.get<double>() <= 1)) f.fail(key, expected);
        eff.push_back(e.get<double>());
      }
    }
  }
  return eff;
}

}  // namespace

MachineProfile machine_from_json(const nlohmann::json& j, const std::string& origin) {
  Fields f(j, origin);
  // "raw" (the measurement a calibrated profile keeps), "fitted" (a refit's
  // factors) and "paced_device" (the pace a paced profile stands for) say
  // how the profile was made; the advisor reads none of them.
  f.only({"name", "description", "engine_device", "gpus_per_node", "compute", "memory", "overlap", "intra_node",
          "inter_node", "gemm", "p2p", "host", "poll_us", "gap_us", "raw", "fitted", "paced_device", "uncertainty",
          "switch_groups"});
  MachineProfile p;
  p.name = f.string("name");
  p.description = f.has("description") ? f.string("description") : "";
  p.gpus_per_node = static_cast<int>(f.integer("gpus_per_node", 1));

  Fields compute = f.object("compute");
  compute.only(documented({"peak_tflops", "attention_efficiency", "flash_attention", "launch_us"}));
  Fields peak = compute.object("peak_tflops");
  peak.only({"bf16", "fp16", "fp32"});
  // V100 and older have no bf16: such a profile gives fp16 instead.
  if (peak.has("bf16") || !peak.has("fp16")) p.peak_flops_bf16 = figure(peak, "bf16", TFLOPS);
  p.peak_flops_fp32 = figure(peak, "fp32", TFLOPS);
  p.attention_efficiency = efficiency(compute, "attention_efficiency");
  if (compute.has("flash_attention")) {
    Fields fa = compute.object("flash_attention");
    fa.only(documented({"curves"}));
    const auto& curves = fa.array("curves");
    for (size_t i = 0; i < curves.size(); ++i) {
      Fields c(curves[i], fa.origin(), fa.path("curves") + "[" + std::to_string(i) + "]");
      c.only({"head_dim", "causal", "efficiency_max", "half_seq"});
      AttentionCurve a;
      a.head_dim = int(c.integer("head_dim", 1));
      if (!c.has("causal") || !c.json().at("causal").is_boolean()) c.fail("causal", "true or false");
      a.causal = c.json().at("causal").get<bool>();
      a.efficiency_max = efficiency(c, "efficiency_max");
      a.half_seq = c.number("half_seq");
      if (!(a.half_seq >= 0 && a.half_seq <= kHighest)) c.fail("half_seq", "a number from 0 to 1e+09");
      p.flash_attention.push_back(a);
    }
    if (p.flash_attention.empty()) fa.fail("curves", "at least one {head_dim, causal, efficiency_max, half_seq}");
  }
  if (peak.has("fp16")) p.peak_flops_fp16 = figure(peak, "fp16", TFLOPS);
  p.launch_s = compute.microseconds("launch_us", "microseconds >= 0: a memory-bound kernel's launch and ramp").value_or(0);

  Fields mem = f.object("memory");
  mem.only(documented({"hbm_GBps", "elementwise_efficiency", "elementwise_by_class", "capacity_GiB", "reserve_GiB"}));
  p.hbm_bandwidth = figure(mem, "hbm_GBps", GB);
  p.elementwise_efficiency = efficiency(mem, "elementwise_efficiency");
  if (mem.has("elementwise_by_class")) {
    const Fields by = mem.object("elementwise_by_class");
    for (const auto& [name, v] : by.json().items()) {
      if (name == "comment" || name == "source") continue;
      int c = 0;
      while (c < kKernelClasses && name != kernel_class_name(KernelClass(c))) ++c;
      if (c == kKernelClasses) by.fail(name, "a kernel class (norm, activation, residual, bias, optimizer, ...)");
      const Fields k = by.object(name);
      k.only({"efficiency", "launch_us"});
      p.elementwise_by_class[size_t(c)] = efficiency(k, "efficiency");
      p.launch_by_class_s[size_t(c)] =
          k.microseconds("launch_us", "microseconds >= 0: the class's cost a launch beyond its bytes").value_or(-1);
    }
  }
  p.hbm_capacity = figure(mem, "capacity_GiB", GiB);
  p.memory_reserve = mem.number("reserve_GiB") * GiB;
  if (p.memory_reserve < 0 || p.memory_reserve >= p.hbm_capacity)
    mem.fail("reserve_GiB", "a number >= 0 and below capacity_GiB");

  Fields ov = f.object("overlap");
  ov.only(documented({"efficiency", "nonblocking_slowdown", "dp_bucket_MiB", "compute_slowdown"}));
  p.overlap_efficiency = ov.fraction("efficiency");
  p.compute_slowdown = ov.number_or("compute_slowdown", 0.0);
  if (!(p.compute_slowdown >= 0 && p.compute_slowdown < 1))
    ov.fail("compute_slowdown", "a fraction from 0 to below 1 (how much slower compute runs under a collective)");
  p.nonblocking_slowdown = ov.number_or("nonblocking_slowdown", 1.0);
  if (!(p.nonblocking_slowdown >= 1 && p.nonblocking_slowdown <= kHighest))
    ov.fail("nonblocking_slowdown", "a number from 1 to 1e+09");
  if (ov.has("dp_bucket_MiB")) p.dp_bucket_bytes = figure(ov, "dp_bucket_MiB", 1048576);

  Fields intra = f.object("intra_node");
  intra.only(documented({"default", "table"}));
  p.intra_default = link_from(intra.object("default"));
  const auto& itable = intra.array("table");
  const bool intra_measured = intra.has("kind") && intra.string("kind") == "measured";
  for (size_t i = 0; i < itable.size(); ++i) {
    Fields e(itable[i], origin, intra.path("table") + "[" + std::to_string(i) + "]");
    p.intra.push_back({e.integer("stride", 1), int(e.integer("size", 2)), link_from(e, "busbw_GBps", {"stride", "size"})});
    p.intra.back().link.measured_here = intra_measured;
  }

  Fields inter = f.object("inter_node");
  p.inter_node = link_from(inter, "node_busbw_GBps", {"table"});
  if (inter.has("table")) {
    const auto& t = inter.array("table");
    for (size_t i = 0; i < t.size(); ++i) {
      Fields e(t[i], origin, inter.path("table") + "[" + std::to_string(i) + "]");
      InterEntry x{int(e.integer("groups_per_node", 1)), int(e.integer("size", 2)),
                   link_from(e, "busbw_GBps", {"groups_per_node", "size", "members_per_node", "rings_per_uplink"})};
      if (e.has("rings_per_uplink")) x.link.rings_per_uplink = int(e.integer("rings_per_uplink", 0));
      x.link.measured_here = inter.has("kind") && inter.string("kind") == "measured";
      x.members_per_node = int(e.integer_or("members_per_node", 1, 1));
      if (x.members_per_node >= x.size)
        e.fail("members_per_node", "an integer >= 1 and below size (a group across nodes has members on 2 or more)");
      p.inter.push_back(x);
    }
  }

  if (f.has("switch_groups")) {
    Fields sg = f.object("switch_groups");
    sg.only(documented({"nodes_per_group", "global_busbw_GBps", "alpha_us"}));
    p.switch_groups.nodes_per_group = int(sg.integer("nodes_per_group", 1));
    p.switch_groups.busbw = figure(sg, "global_busbw_GBps", GB);
    if (sg.has("alpha_us")) p.switch_groups.alpha_s = alpha_from(sg);
  }

  Fields gemm = f.object("gemm");
  gemm.only(documented({"m", "n", "k", "bf16", "fp32", "rate"}));
  if (gemm.has("rate")) {
    Fields r = gemm.object("rate");
    r.only({"efficiency_max", "fixed_us"});
    p.gemm_rate.efficiency_max = efficiency(r, "efficiency_max");
    p.gemm_rate.fixed_s = r.microseconds("fixed_us", "microseconds >= 0: a GEMM's fixed part").value_or(0);
  }
  for (GemmTable* t : {&p.gemm_bf16, &p.gemm_fp32}) {
    t->m = ascending(gemm, "m");
    t->n = ascending(gemm, "n");
    t->k = ascending(gemm, "k");
  }
  // With a rate, a bf16 table is optional: the rate prices bf16 and fp16.
  if (!gemm.has("rate") || gemm.has("bf16"))
    p.gemm_bf16.eff = eff_table(gemm, "bf16", p.gemm_bf16.m.size(), p.gemm_bf16.n.size(), p.gemm_bf16.k.size());
  p.gemm_fp32.eff = eff_table(gemm, "fp32", p.gemm_fp32.m.size(), p.gemm_fp32.n.size(), p.gemm_fp32.k.size());

  if (f.has("p2p")) {
    Fields p2p = f.object("p2p");
    // "table": every pair geometry's own fit, kept for people (the advisor
    // prices pairs from the two tiers' figures).
    p2p.only(documented({"intra_node", "inter_node", "table"}));
    p.has_p2p = true;
    p.p2p_intra = p2p_from(p2p.object("intra_node"));
    p.p2p_inter = p2p_from(p2p.object("inter_node"));
  }
  if (f.has("host")) {
    Fields host = f.object("host");
    host.only(documented({"link_GBps", "node_link_GBps", "memory_GiB"}));
    p.has_host = true;
    p.host_link_bw = figure(host, "link_GBps", GB);
    p.host_node_bw = host.has("node_link_GBps") ? figure(host, "node_link_GBps", GB) : p.host_link_bw * p.gpus_per_node;
    p.host_memory = figure(host, "memory_GiB", GiB);
  }
  if (f.has("uncertainty")) {
    Fields u = f.object("uncertainty");
    u.only(documented({"source", "compute", "intra", "inter", "checked_nodes", "beyond"}));
    Uncertainty& x = p.uncertainty;
    x.stated = true;
    auto error = [&](const char* key, double fallback) {
      const double v = u.number_or(key, fallback);
      if (!(v >= 0 && v < 1)) u.fail(key, "a relative error from 0 to below 1");
      return v;
    };
    x.compute = error("compute", x.compute);
    x.intra = error("intra", x.intra);
    x.inter = error("inter", x.inter);
    x.checked_nodes = int(u.integer_or("checked_nodes", 0, 0));
    x.beyond = error("beyond", x.inter);
  }
  p.poll_s = f.microseconds("poll_us", "microseconds >= 0: the poll interval Δ the links were measured with (measure --poll-us)");
  p.gap_s = f.microseconds(
      "gap_us", "microseconds >= 0: the idle time before each operation the links were measured after (measure --gap-us)");
  if (f.has("engine_device")) {
    p.engine_device = f.string("engine_device");
    if (p.engine_device != "cpu" && p.engine_device != "cuda")
      f.fail("engine_device", "\"cpu\" or \"cuda\" (the engine's device on this machine)");
  }
  return p;
}

const char* default_machine() { return "perlmutter"; }

std::vector<std::string> bundled_machines() {
  std::vector<std::string> names;
  for (const auto& b : bundled_profiles()) names.push_back(b.name);
  return names;
}

nlohmann::json machine_json(const std::string& name_or_file, std::string& origin) {
  for (const auto& b : bundled_profiles())
    if (name_or_file == b.name) {
      origin = std::string("bundled profile ") + b.name;
      return nlohmann::json::parse(b.json);
    }
  bool looks_like_file = name_or_file.find('/') != std::string::npos ||
                         name_or_file.ends_with(".json") || std::filesystem::exists(name_or_file);
  if (!looks_like_file) {
    std::string known;
    for (const auto& n : bundled_machines()) known += (known.empty() ? "" : ", ") + n;
    input_error("unknown machine '" + name_or_file + "'; bundled: " + known + " (or give a profile JSON file)");
  }
  origin = name_or_file;
  return read_json_file(name_or_file);
}

MachineProfile load_machine(const std::string& name_or_file) {
  std::string origin;
  nlohmann::json j = machine_json(name_or_file, origin);
  return machine_from_json(j, origin);
}

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::Intra: return "intra-node bandwidth";
    case Tier::Inter: return "inter-node bandwidth";
    case Tier::Gemm: return "GEMM efficiency";
  }
  return "";
}

const char* collective_form_name(CollectiveForm f) {
  switch (f) {
    case CollectiveForm::Ring: return "ring";
    case CollectiveForm::TwoLevel: return "two-level";
    case CollectiveForm::Pat: return "pat";
  }
  return "";
}

void scale_link(LinkParams& l, double bw_factor, double alpha_factor) {
  l.busbw *= bw_factor;
  l.alpha_s *= alpha_factor;
  l.call_s *= alpha_factor, l.ll_alpha_s *= alpha_factor;
  l.curve_bw_factor *= bw_factor, l.curve_alpha_factor *= alpha_factor;
  for (int k = 0; k < 3; ++k) {
    l.op_busbw[k] *= bw_factor, l.op_alpha_s[k] *= alpha_factor;
    l.nb_busbw[k] *= bw_factor, l.nb_alpha_s[k] *= alpha_factor;
  }
}

MachineProfile scaled(const MachineProfile& p, Tier t, double factor, double alpha_factor) {
  MachineProfile q = p;
  switch (t) {
    case Tier::Intra:
      scale_link(q.intra_default, factor, alpha_factor);
      for (auto& e : q.intra) scale_link(e.link, factor, alpha_factor);
      q.p2p_intra.bw *= factor;
      break;
    case Tier::Inter:
      scale_link(q.inter_node, factor, alpha_factor);
      for (auto& e : q.inter) scale_link(e.link, factor, alpha_factor);
      q.switch_groups.busbw *= factor, q.switch_groups.alpha_s *= alpha_factor;  // the global link is across nodes too
      q.p2p_inter.bw *= factor;
      break;
    case Tier::Gemm:
      // Attention kernels are GEMMs too; an efficiency above 1 is still a
      // valid what-if (the table may be pessimistic).
      for (auto* g : {&q.gemm_bf16, &q.gemm_fp32})
        for (double& e : g->eff) e *= factor;
      q.gemm_rate.efficiency_max *= factor;
      q.attention_efficiency *= factor;
      for (auto& a : q.flash_attention) a.efficiency_max *= factor;
      break;
  }
  return q;
}

}  // namespace ff
