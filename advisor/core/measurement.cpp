#include "advisor/core/measurement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "advisor/core/device_pace.hpp"  // as_written
#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

constexpr double us = 1e-6, GB = 1e9, GiB = 1073741824.0, TFLOPS = 1e12;

std::string fmt_us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds / us);
  return buf;
}

nlohmann::json micros(const std::vector<double>& seconds) {
  nlohmann::json a = nlohmann::json::array();
  for (double s : seconds) a.push_back(s / us);
  return a;
}

// A non-empty array of positive times in µs, as seconds.
std::vector<double> times_from(const Fields& f, const std::string& key) {
  std::vector<double> t;
  for (const auto& x : f.array(key)) {
    if (!x.is_number() || !(x.get<double>() > 0) || !std::isfinite(x.get<double>()))
      f.fail(key, "a non-empty array of times in µs > 0");
    t.push_back(x.get<double>() * us);
  }
  if (t.empty()) f.fail(key, "a non-empty array of times in µs > 0");
  return t;
}

// The fields every timed row has: its size, iterations and one time per repeat.
void timing_from(const Fields& c, TimedSize& s) {
  s.bytes = c.positive("bytes");
  s.iters = int(c.integer_or("iters", 1, 1));
  s.times_s = times_from(c, "times_us");
}

std::string string_or(const Fields& f, const std::string& key) { return f.has(key) ? f.string(key) : ""; }

nlohmann::json object_or(const Fields& f, const std::string& key) {
  return f.has(key) ? f.object(key).json() : nlohmann::json::object();
}

CollectiveSample collective_from(const Fields& c) {
  CollectiveSample s;
  if (!coll_from_name(c.string("op"), s.op)) c.fail("op", "\"all-reduce\", \"all-gather\" or \"reduce-scatter\"");
  std::string tier = c.string("tier");
  if (tier != "intra" && tier != "inter") c.fail("tier", "\"intra\" or \"inter\"");
  s.geometry.inter = tier == "inter";
  s.geometry.size = int(c.integer("size", 2));
  s.geometry.stride = c.integer_or("stride", 1, 1);
  s.geometry.groups_per_node = int(c.integer_or("groups_per_node", 1, 1));
  s.geometry.members_per_node = int(c.integer_or("members_per_node", 1, 1));  // absent before it was measured
  if (s.geometry.inter && s.geometry.members_per_node >= s.geometry.size)
    c.fail("members_per_node", "an integer >= 1 and below size (a group across nodes has members on 2 or more)");
  s.geometry.node_stride = int(c.integer_or("node_stride", 1, 1));  // absent: consecutive nodes
  if (s.geometry.node_stride > 1 && (!s.geometry.inter || s.geometry.members_per_node != 1))
    c.fail("node_stride", "1, or more only across nodes with one member a node");
  s.nonblocking = c.boolean_or("nonblocking", false);
  timing_from(c, s);
  return s;
}

P2PSample p2p_from(const Fields& c) {
  P2PSample s;
  if (c.has("op") && c.string("op") != "send-recv") c.fail("op", "\"send-recv\" (or absent)");
  std::string tier = c.string("tier");
  if (tier != "intra" && tier != "inter") c.fail("tier", "\"intra\" or \"inter\"");
  s.geometry.inter = tier == "inter";
  s.geometry.size = 2;
  s.geometry.stride = c.integer_or("stride", 1, 1);
  s.geometry.groups_per_node = int(c.integer_or("pairs_per_node", 1, 1));
  timing_from(c, s);
  return s;
}

HostLinkSample host_link_from(const Fields& c) {
  HostLinkSample s;
  std::string dir = c.string("direction");
  if (dir != "h2d" && dir != "d2h") c.fail("direction", "\"h2d\" (host to device) or \"d2h\"");
  s.to_device = dir == "h2d";
  s.gpus = int(c.integer("gpus", 1));
  timing_from(c, s);
  return s;
}

GemmSample gemm_sample_from(const Fields& g) {
  GemmSample s;
  s.m = g.integer("m", 1);
  s.n = g.integer("n", 1);
  s.k = g.integer("k", 1);
  s.layout = g.has("layout") ? g.string("layout") : "nn";
  if (s.layout != "nn" && s.layout != "nt" && s.layout != "tn") g.fail("layout", "\"nn\", \"nt\" or \"tn\"");
  s.times_s = times_from(g, "times_us");
  return s;
}

EngineStepSample engine_step_from(const Fields& e) {
  EngineStepSample s;
  s.model = model_from_json(e.object("model").json(), e.where("model"));
  s.micro_batch = int(e.integer("micro_batch", 1));
  s.compute_s = times_from(e, "compute_us");
  s.gemm_s = times_from(e, "gemm_us");
  if (s.gemm_s.size() != s.compute_s.size()) e.fail("gemm_us", "one time per step, as many as compute_us");
  return s;
}

GpuKernelSample gpu_kernel_from(const Fields& g) {
  GpuKernelSample s;
  s.kernel = g.string("kernel");
  if (s.kernel == "flash_attention") {
    s.seq = g.number("seq");
    s.head_dim = int(g.integer("head_dim", 1));
    s.flops = g.number("flops");
    if (!(s.seq > 0)) g.fail("seq", "tokens > 0");
    if (!(s.flops > 0)) g.fail("flops", "a number > 0");
  } else {
    s.bytes = g.number("bytes");
    if (!(s.bytes > 0)) g.fail("bytes", "a number > 0");
  }
  s.times_s = times_from(g, "times_us");
  return s;
}

HidingSample hiding_from(const Fields& h) {
  HidingSample s;
  s.m = h.positive("m"), s.n = h.positive("n"), s.k = h.positive("k");
  s.blocks = int(h.integer("blocks", 1));
  s.copying = h.boolean_or("copying", true);
  s.alone_s = times_from(h, "alone_us");
  s.beside_s = times_from(h, "beside_us");
  s.copy_bytes_per_s = h.number_or("copy_GBps", 0) * GB;
  if (s.copy_bytes_per_s < 0) h.fail("copy_GBps", "GB/s >= 0");
  return s;
}

// Each element of the array f[key], read by `from` with its own path in errors.
template <class T, class From>
void append_elements(const Fields& f, const char* key, std::vector<T>& out, From from) {
  const auto& a = f.array(key);
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(from(Fields(a[i], f.origin(), f.path(key) + "[" + std::to_string(i) + "]")));
}

Measurement measurement_from(const Fields& f) {
  if (f.string("format") != kMeasurementFormat)
    f.fail("format", std::string("\"") + kMeasurementFormat + "\"");
  Measurement m;
  m.backend = f.string("backend");
  m.ranks = int(f.integer("ranks", 1));
  m.gpus_per_node = int(f.integer("gpus_per_node", 1));
  m.nodes = int(f.integer_or("nodes", 1, (static_cast<long long>(m.ranks) + m.gpus_per_node - 1) / m.gpus_per_node));
  m.command = string_or(f, "command");
  m.host = string_or(f, "host");
  m.date = string_or(f, "date");
  m.versions = object_or(f, "versions");
  m.topology = object_or(f, "topology");
  if (f.has("collectives")) append_elements(f, "collectives", m.collectives, collective_from);
  if (f.has("gemm")) {
    Fields g = f.object("gemm");
    std::string dt = g.string("dtype");
    if (dt != "bf16" && dt != "fp32") g.fail("dtype", "\"bf16\" or \"fp32\"");
    m.gemm_dtype = parse_dtype(dt);
    m.gemm_peak_flops = g.number_or("peak_tflops", 0) * TFLOPS;
    if (m.gemm_peak_flops < 0) g.fail("peak_tflops", "a number >= 0");
    if (g.has("samples")) append_elements(g, "samples", m.gemm, gemm_sample_from);
  }
  m.stream_bytes_per_s = f.number_or("stream_GBps", 0) * GB;
  if (m.stream_bytes_per_s < 0) f.fail("stream_GBps", "a number >= 0");
  m.memory_bytes_per_rank = f.number_or("memory_GiB_per_rank", 0) * GiB;
  if (m.memory_bytes_per_rank < 0) f.fail("memory_GiB_per_rank", "a number >= 0");
  if (f.has("engine_steps")) append_elements(f, "engine_steps", m.engine_steps, engine_step_from);
  if (f.has("gpu_kernels")) append_elements(f, "gpu_kernels", m.gpu_kernels, gpu_kernel_from);
  m.launch_s = f.number_or("launch_us", 0) * us;
  if (m.launch_s < 0) f.fail("launch_us", "microseconds >= 0");
  if (f.has("hiding")) append_elements(f, "hiding", m.hiding, hiding_from);
  if (f.has("p2p")) append_elements(f, "p2p", m.p2p, p2p_from);
  if (f.has("host_link")) {
    Fields h = f.object("host_link");
    m.host_link_kind = h.string("kind");
    if (m.host_link_kind != "cuda-pinned" && m.host_link_kind != "host-memcpy")
      h.fail("kind", "\"cuda-pinned\" or \"host-memcpy\"");
    append_elements(h, "samples", m.host_link, host_link_from);
  }
  m.host_memory_bytes = f.number_or("host_memory_GiB", 0) * GiB;
  if (m.host_memory_bytes < 0) f.fail("host_memory_GiB", "a number >= 0");
  m.poll_s = f.microseconds("poll_us", "microseconds >= 0 (measure --poll-us)");
  m.gap_s = f.microseconds("gap_us", "microseconds >= 0 (measure --gap-us)");
  m.nodes_per_group = int(f.integer_or("nodes_per_group", 1, 0));
  return m;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

double TimedSize::median_s() const { return median(times_s); }
double TimedSize::min_s() const { return times_s.empty() ? 0 : *std::min_element(times_s.begin(), times_s.end()); }
double TimedSize::max_s() const { return times_s.empty() ? 0 : *std::max_element(times_s.begin(), times_s.end()); }
double GemmSample::median_s() const { return median(times_s); }
double GpuKernelSample::median_s() const { return median(times_s); }
double HidingSample::slowdown() const { return median(beside_s) / median(alone_s) - 1; }

std::string host_link_description(const std::string& kind) {
  if (kind == "cuda-pinned") return "pinned cudaMemcpyAsync between host memory and the GPU";
  if (kind == "host-memcpy") return "a host-to-host memcpy between two buffers stands in for the GPU link (no GPU here: it is not a GPU link)";
  return kind;
}

double busbw_factor(Coll c, int g) {
  if (g <= 1) return 0;
  return (c == Coll::AllReduce ? 2.0 : 1.0) * (g - 1) / g;
}

bool coll_from_name(const std::string& name, Coll& c) {
  for (Coll x : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter})
    if (name == coll_name(x)) {
      c = x;
      return true;
    }
  return false;
}

void merge_sample(std::vector<CollectiveSample>& into, const CollectiveSample& s) {
  for (auto& c : into) {
    const Geometry &a = c.geometry, &b = s.geometry;
    if (c.op == s.op && c.nonblocking == s.nonblocking && c.bytes == s.bytes && a.inter == b.inter && a.size == b.size &&
        (a.inter ? a.groups_per_node == b.groups_per_node && a.members_per_node == b.members_per_node &&
                       a.node_stride == b.node_stride
                 : a.stride == b.stride)) {
      c.times_s.insert(c.times_s.end(), s.times_s.begin(), s.times_s.end());
      return;
    }
  }
  into.push_back(s);
}

void merge_sample(std::vector<P2PSample>& into, const P2PSample& s) {
  for (auto& c : into) {
    const Geometry &a = c.geometry, &b = s.geometry;
    if (c.bytes == s.bytes && a.inter == b.inter && (a.inter ? a.groups_per_node == b.groups_per_node : a.stride == b.stride)) {
      c.times_s.insert(c.times_s.end(), s.times_s.begin(), s.times_s.end());
      return;
    }
  }
  into.push_back(s);
}

void merge_sample(std::vector<HostLinkSample>& into, const HostLinkSample& s) {
  for (auto& c : into)
    if (c.to_device == s.to_device && c.gpus == s.gpus && c.bytes == s.bytes) {
      c.times_s.insert(c.times_s.end(), s.times_s.begin(), s.times_s.end());
      return;
    }
  into.push_back(s);
}

Measurement merge_measurements(const std::vector<Measurement>& ms) {
  if (ms.empty()) input_error("no measurements to merge");
  Measurement out = ms.front();
  out.collectives.clear();
  out.p2p.clear();
  out.host_link.clear();
  for (size_t i = 0; i < ms.size(); ++i) {
    const Measurement& m = ms[i];
    if (m.gpus_per_node != out.gpus_per_node)
      input_error("measurements disagree on ranks per node (" + std::to_string(out.gpus_per_node) + " and " +
                  std::to_string(m.gpus_per_node) + "): they are not of one placement");
    // Links timed in two ways are not one machine.
    auto same_way = [](std::optional<double>& had, const std::optional<double>& next, const char* field,
                       const char* what) {
      if (!next) return;
      if (had && std::abs(*had - *next) > 1e-9)
        input_error(std::string("measurements ") + what + " (" + field + " " + fmt_us(*had) + " and " + fmt_us(*next) +
                    "): their links were timed in two ways");
      had = next;
    };
    same_way(out.poll_s, m.poll_s, "poll_us", "waited for MPI with different poll intervals");
    same_way(out.gap_s, m.gap_s, "gap_us", "idled before each operation for different times");
    if (m.nodes_per_group != out.nodes_per_group)
      input_error("measurements disagree on nodes per switch group (" + std::to_string(out.nodes_per_group) + " and " +
                  std::to_string(m.nodes_per_group) + "): they are not of one fabric");
    for (const auto& c : m.collectives) merge_sample(out.collectives, c);
    for (const auto& c : m.p2p) merge_sample(out.p2p, c);
    if (!m.host_link.empty()) {
      // A GPU's link and a memcpy standing in for it are different things.
      if (!out.host_link_kind.empty() && !out.host_link.empty() && m.host_link_kind != out.host_link_kind)
        input_error("measurements time the host link differently (" + out.host_link_kind + " and " + m.host_link_kind + ")");
      out.host_link_kind = m.host_link_kind;
      for (const auto& c : m.host_link) merge_sample(out.host_link, c);
    }
    if (i == 0) continue;
    if (!m.gemm.empty()) {
      if (!out.gemm.empty() && m.gemm_dtype != out.gemm_dtype)
        input_error("measurements hold GEMM samples of different dtypes (" + std::string(dtype_name(out.gemm_dtype)) +
                    " and " + dtype_name(m.gemm_dtype) + ")");
      out.gemm_dtype = m.gemm_dtype;
      out.gemm.insert(out.gemm.end(), m.gemm.begin(), m.gemm.end());
    }
    out.gemm_peak_flops = std::max(out.gemm_peak_flops, m.gemm_peak_flops);
    out.engine_steps.insert(out.engine_steps.end(), m.engine_steps.begin(), m.engine_steps.end());
    out.gpu_kernels.insert(out.gpu_kernels.end(), m.gpu_kernels.begin(), m.gpu_kernels.end());
    if (!(out.launch_s > 0)) out.launch_s = m.launch_s;
    out.hiding.insert(out.hiding.end(), m.hiding.begin(), m.hiding.end());
    if (!(out.stream_bytes_per_s > 0)) out.stream_bytes_per_s = m.stream_bytes_per_s;
    if (!(out.memory_bytes_per_rank > 0)) out.memory_bytes_per_rank = m.memory_bytes_per_rank;
    if (!(out.host_memory_bytes > 0)) out.host_memory_bytes = m.host_memory_bytes;
    out.ranks = std::max(out.ranks, m.ranks);
    out.nodes = std::max(out.nodes, m.nodes);
    if (!m.command.empty() && m.command != out.command) out.command += (out.command.empty() ? "" : "; ") + m.command;
    if (out.host.empty()) out.host = m.host;
    if (out.date.empty()) out.date = m.date;
    for (auto it = m.versions.begin(); it != m.versions.end(); ++it)
      if (!out.versions.contains(it.key())) out.versions[it.key()] = it.value();
  }
  return out;
}

namespace {

// A timed row's nccl-tests fields, the same for collectives and pairs.
void timing_fields(nlohmann::json& j, const TimedSize& c, double algbw, double busbw) {
  j["bytes"] = c.bytes;
  j["iters"] = c.iters;
  j["times_us"] = micros(c.times_s);
  j["median_us"] = c.median_s() / us;
  j["min_us"] = c.min_s() / us;
  j["max_us"] = c.max_s() / us;
  j["algbw_GBps"] = algbw;
  j["busbw_GBps"] = busbw;
}

}  // namespace

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json colls = nlohmann::json::array();
  for (const auto& c : m.collectives) {
    double t = c.median_s();
    double algbw = t > 0 ? c.bytes / t / GB : 0;
    colls.push_back({{"op", coll_name(c.op)},
                     {"tier", c.geometry.inter ? "inter" : "intra"},
                     {"stride", c.geometry.stride},
                     {"size", c.geometry.size},
                     {"groups_per_node", c.geometry.groups_per_node},
                     {"members_per_node", c.geometry.members_per_node}});
    if (c.geometry.node_stride > 1) colls.back()["node_stride"] = c.geometry.node_stride;
    timing_fields(colls.back(), c, algbw, algbw * busbw_factor(c.op, c.geometry.size));
    if (c.nonblocking) colls.back()["nonblocking"] = true;
  }
  nlohmann::json j = {{"format", kMeasurementFormat},
                      {"backend", m.backend},
                      {"ranks", m.ranks},
                      {"gpus_per_node", m.gpus_per_node},
                      {"nodes", m.nodes},
                      {"command", m.command},
                      {"host", m.host},
                      {"date", m.date},
                      {"versions", m.versions},
                      {"topology", m.topology},
                      {"collectives", colls}};
  if (!m.gemm.empty() || m.gemm_peak_flops > 0) {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& g : m.gemm) {
      double t = g.median_s();
      samples.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"layout", g.layout},
                         {"times_us", micros(g.times_s)}, {"tflops", t > 0 ? g.flops() / t / TFLOPS : 0}});
    }
    j["gemm"] = {{"dtype", dtype_name(m.gemm_dtype)}, {"peak_tflops", m.gemm_peak_flops / TFLOPS}, {"samples", samples}};
  }
  if (m.stream_bytes_per_s > 0) j["stream_GBps"] = m.stream_bytes_per_s / GB;
  if (m.memory_bytes_per_rank > 0) j["memory_GiB_per_rank"] = m.memory_bytes_per_rank / GiB;
  if (!m.engine_steps.empty()) {
    j["engine_steps"] = nlohmann::json::array();
    for (const auto& e : m.engine_steps)
      j["engine_steps"].push_back({{"model", to_json(e.model)}, {"micro_batch", e.micro_batch},
                                   {"compute_us", micros(e.compute_s)}, {"gemm_us", micros(e.gemm_s)}});
  }
  if (!m.gpu_kernels.empty()) {
    j["gpu_kernels"] = nlohmann::json::array();
    for (const auto& k : m.gpu_kernels) {
      nlohmann::json r = {{"kernel", k.kernel}};
      if (k.kernel == "flash_attention") r.update({{"seq", k.seq}, {"head_dim", k.head_dim}, {"flops", k.flops}});
      else r["bytes"] = k.bytes;
      r["times_us"] = micros(k.times_s);
      j["gpu_kernels"].push_back(r);
    }
  }
  if (m.launch_s > 0) j["launch_us"] = m.launch_s / us;
  for (const auto& h : m.hiding)
    j["hiding"].push_back({{"m", h.m}, {"n", h.n}, {"k", h.k}, {"blocks", h.blocks}, {"copying", h.copying},
                           {"alone_us", micros(h.alone_s)}, {"beside_us", micros(h.beside_s)},
                           {"copy_GBps", h.copy_bytes_per_s / GB}});
  if (!m.p2p.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : m.p2p) {
      double t = c.median_s(), bw = t > 0 ? c.bytes / t / GB : 0;
      // nccl-tests' sendrecv: algbw = busbw = bytes / time, bytes one way.
      rows.push_back({{"op", "send-recv"},
                      {"tier", c.geometry.inter ? "inter" : "intra"},
                      {"stride", c.geometry.stride},
                      {"pairs_per_node", c.geometry.groups_per_node}});
      timing_fields(rows.back(), c, bw, bw);
    }
    j["p2p"] = rows;
  }
  if (!m.host_link.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : m.host_link) {
      double t = c.median_s();
      rows.push_back({{"direction", c.to_device ? "h2d" : "d2h"}, {"gpus", c.gpus}, {"bytes", c.bytes}, {"iters", c.iters},
                      {"times_us", micros(c.times_s)}, {"median_us", t / us}, {"GBps", t > 0 ? c.bytes / t / GB : 0}});
    }
    j["host_link"] = {{"kind", m.host_link_kind}, {"what", host_link_description(m.host_link_kind)}, {"samples", rows}};
  }
  if (m.host_memory_bytes > 0) j["host_memory_GiB"] = m.host_memory_bytes / GiB;
  if (m.poll_s) j["poll_us"] = as_written(*m.poll_s / us);  // 50, not 49.99999999999999
  if (m.gap_s) j["gap_us"] = as_written(*m.gap_s / us);
  if (m.nodes_per_group > 0) j["nodes_per_group"] = m.nodes_per_group;
  return j;
}

Measurement measurement_from_json(const nlohmann::json& j, const std::string& origin) {
  // A fitted profile keeps its measurement in "raw": errors then name
  // "raw.collectives[3]…" so the person finds the field in that file.
  if (j.is_object() && !j.contains("format") && j.contains("raw"))
    return measurement_from(Fields(j.at("raw"), origin, "raw"));
  if (j.is_object() && !j.contains("format") && j.contains("intra_node"))
    input_error(origin + ": a machine profile with no \"raw\" measurement to refit from");
  return measurement_from(Fields(j, origin));
}

int rings_per_uplink(const Geometry& g, int nodes, int nodes_per_group) {
  if (!g.inter || nodes_per_group <= 0) return 0;
  const int span = std::max(1, g.size / std::max(1, g.members_per_node));  // nodes a group spans
  const int k = std::max(1, g.node_stride);
  std::vector<int> crossing(size_t((nodes + nodes_per_group - 1) / nodes_per_group), 0);
  for (int first = 0; first + span * k <= nodes; first += span * k)
    for (int lane = first; lane < first + k; ++lane) {
      std::set<int> touched;  // the switch groups of this lane's nodes
      for (int t = 0; t < span; ++t) touched.insert((lane + t * k) / nodes_per_group);
      if (touched.size() < 2) continue;
      for (int s : touched) crossing[size_t(s)] += g.groups_per_node;  // the lane's c groups all cross
    }
  return crossing.empty() ? 0 : *std::max_element(crossing.begin(), crossing.end());
}

}  // namespace ff
