#include "advisor/calibration/nccl_tests_log.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

constexpr double us = 1e-6;

// Who ran where, from the "# Using devices" lines (text) or config.devices (JSON).
struct RankInfo {
  int rank = 0, group = 0;
  std::string host;
};

// A run being read: the parts of NcclTestsRun plus what the text gives on the way.
struct RunText {
  NcclTestsRun run;
  std::string program;            // "all_reduce_perf", when the log names it
  int iters = 0;
  std::vector<RankInfo> ranks;
  std::vector<std::string> columns;  // the "size count type ..." header, once seen
  int columns_line = 0, time_col = -1, wrong_col = -1;
  bool closed = false;            // "# Avg bus bandwidth" seen
};

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool parse_double(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);
}

// Launchers tag every line: Open MPI --tag-output "[1,0]<stdout>:", Intel MPI
// and others "[0] ", srun -l "0: ", pdsh/clush "nid001234: ". Remove one tag.
std::string strip_launcher_tag(const std::string& line) {
  static const std::regex tag(R"(^(\[\d+,\d+\]<std(out|err)>:|\[\d+\] ?|\d+: |[A-Za-z][\w.-]*: ))");
  std::smatch m;
  if (std::regex_search(line, m, tag, std::regex_constants::match_continuous)) return line.substr(size_t(m.length(0)));
  return line;
}

std::string where(const std::string& file, int line) { return file + ":" + std::to_string(line); }

// What the log's text gives the record (host names, the version) is written
// as JSON, which holds UTF-8 text only: `line` is refused otherwise.
void require_text(const std::string& line, const std::string& at) {
  try {
    (void)nlohmann::json(line).dump();
  } catch (const nlohmann::json::type_error&) {
    input_error(at + ": not UTF-8 text (a corrupted log?)");
  }
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "all_reduce_perf", "all_reduce_perf_mpi", "logs/allreduce-8gpu.txt" → the collective.
bool coll_from_text(std::string s, Coll& c) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char x) { return char(std::tolower(x)); });
  s.erase(std::remove_if(s.begin(), s.end(), [](char x) { return x == '_' || x == '-'; }), s.end());
  if (s.find("reducescatter") != std::string::npos) return c = Coll::ReduceScatter, true;
  if (s.find("allreduce") != std::string::npos) return c = Coll::AllReduce, true;
  if (s.find("allgather") != std::string::npos) return c = Coll::AllGather, true;
  return false;
}

// The collective of a run: given, else what the log says it ran, else the file name.
Coll resolve_op(const RunText& r, const std::string& file, const NcclTestsOptions& o) {
  Coll from_log;
  bool known = !r.program.empty() && coll_from_text(r.program, from_log);
  std::string at = r.run.first_line ? where(file, r.run.first_line) : file;
  if (!r.program.empty() && !known)
    input_error(at + ": the log is from " + r.program +
                ", not a collective the advisor prices (all_reduce_perf, all_gather_perf, reduce_scatter_perf)");
  if (o.op) {
    if (known && from_log != *o.op)
      input_error(at + ": the log is from " + r.program + " but the collective was given as " + coll_name(*o.op));
    return *o.op;
  }
  if (known) return from_log;
  Coll from_name;
  if (coll_from_text(base_name(file), from_name)) return from_name;
  input_error(at + ": cannot tell which collective this log measured (it does not name its binary): name the file "
              "after it (all_reduce_perf.log, all_gather_perf.log, reduce_scatter_perf.log) or give the collective");
}

// MODEL.md §2's placement rule, applied to the ranks the log lists.
void resolve_geometry(NcclTestsRun& run, const std::vector<RankInfo>& ranks, const NcclTestsOptions& o) {
  std::string at = run.first_line ? where(run.file, run.first_line) : run.file;
  if (o.geometry) {
    run.geometry = *o.geometry;
    run.geometry_from = "given";
    if (run.geometry.size == 0) {  // the size is the ranks the log lists
      if (ranks.empty()) input_error(at + ": no '# Using devices' lines to count the ranks from: give the group size");
      run.geometry.size = int(ranks.size());
      run.geometry_from = "given, size = the " + std::to_string(ranks.size()) + " ranks listed";
    }
  } else if (!ranks.empty()) {
    std::map<int, std::vector<const RankInfo*>> groups;
    std::map<std::string, int> per_host;
    for (const auto& r : ranks) groups[r.group].push_back(&r), ++per_host[r.host];
    for (const auto& [host, n] : per_host)
      if (n > o.gpus_per_node)
        input_error(at + ": " + std::to_string(n) + " ranks ran on " + host + " but a node holds " +
                    std::to_string(o.gpus_per_node) + " (--gpus-per-node)");
    size_t g = groups.begin()->second.size();
    for (const auto& [id, members] : groups)
      if (members.size() != g)
        input_error(at + ": groups of different sizes (" + std::to_string(g) + " and " +
                    std::to_string(members.size()) + " ranks): give the geometry");
    bool spans = false;
    for (const auto& [id, members] : groups)
      for (const auto* m : members) spans |= m->host != members.front()->host;
    if (o.size > 0 && size_t(o.size) != g)
      input_error(at + ": the log lists groups of " + std::to_string(g) + " ranks, but the group size was given as " +
                  std::to_string(o.size));
    run.geometry.size = int(g);
    run.geometry.inter = spans;
    if (!spans) {
      long long stride = 0;
      for (const auto& [id, members] : groups) {
        std::vector<int> r;
        for (const auto* m : members) r.push_back(m->rank);
        std::sort(r.begin(), r.end());
        for (size_t i = 1; i < r.size(); ++i) {
          if (stride && r[i] - r[i - 1] != stride)
            input_error(at + ": the ranks of group " + std::to_string(id) + " are not evenly spaced: give --stride and --size");
          stride = r[i] - r[i - 1];
        }
      }
      run.geometry.stride = std::max(1LL, stride);
      run.geometry_from = "devices listed: " + std::to_string(groups.size()) + " group(s) of " + std::to_string(g) +
                          " inside one host, rank stride " + std::to_string(run.geometry.stride);
    } else {
      // c_node: groups with members both on this host and elsewhere; and the
      // most members one such group has on one host (an 8-rank group on 2
      // hosts of 4 is not 8 ranks on 8 hosts).
      int c = 0, most = 1;
      for (const auto& [host, n] : per_host) {
        int here = 0;
        for (const auto& [id, members] : groups) {
          int on = 0;
          bool off = false;
          for (const auto* m : members) {
            if (m->host == host) ++on;
            else off = true;
          }
          if (on && off) ++here, most = std::max(most, on);
        }
        c = std::max(c, here);
      }
      run.geometry.groups_per_node = c;
      run.geometry.members_per_node = most;
      run.geometry_from = "devices listed: " + std::to_string(groups.size()) + " group(s) of " + std::to_string(g) +
                          " across " + std::to_string(per_host.size()) + " hosts, " + std::to_string(c) +
                          " per node" + (most > 1 ? ", " + std::to_string(most) + " members per node" : "");
    }
  } else if (o.size > 0) {
    run.geometry.size = o.size;
    run.geometry.inter = o.size > o.gpus_per_node;
    run.geometry_from = "no devices listed: " + std::to_string(o.size) + " ranks " +
                        (run.geometry.inter ? "across nodes, 1 per node" : "inside one node, stride 1");
  } else {
    input_error(at + ": the log lists no devices ('# Using devices' lines) to count the ranks from: give the group "
                "size (--size)");
  }
  if (run.geometry.size < 2) input_error(at + ": a group of " + std::to_string(run.geometry.size) + " rank measures no link");
  if (!run.geometry.inter && run.geometry.stride * (run.geometry.size - 1) >= o.gpus_per_node)
    input_error(at + ": an intra-node group of " + std::to_string(run.geometry.size) + " ranks, stride " +
                std::to_string(run.geometry.stride) + ", does not fit in a node of " + std::to_string(o.gpus_per_node));
}

// A sample per size; a size seen again (nccl-tests -N, or a repeated sweep) is a repeat.
void add_time(NcclTestsRun& run, double bytes, int iters, const std::vector<double>& seconds) {
  for (auto& s : run.samples)
    if (s.bytes == bytes) {
      s.times_s.insert(s.times_s.end(), seconds.begin(), seconds.end());
      return;
    }
  CollectiveSample s;
  s.bytes = bytes;
  s.iters = iters;
  s.times_s = seconds;
  run.samples.push_back(s);
}

void finish(NcclTestsRun& run, const std::vector<RankInfo>& ranks, Coll op, const NcclTestsOptions& o) {
  run.op = op;
  run.ranks = int(ranks.size());
  for (const auto& r : ranks)
    if (std::find(run.hosts.begin(), run.hosts.end(), r.host) == run.hosts.end()) run.hosts.push_back(r.host);
  resolve_geometry(run, ranks, o);
  for (auto& s : run.samples) s.op = op, s.geometry = run.geometry;
}

void add_rank(RunText& r, const RankInfo& info, const std::string& at) {
  for (const auto& x : r.ranks)
    if (x.rank == info.rank)
      input_error(at + ": rank " + std::to_string(info.rank) + " is listed twice: several independent runs were "
                  "logged together (was nccl-tests started by the wrong MPI launcher, as N single-rank jobs?)");
  r.ranks.push_back(info);
}

// "Rank  3 Group  0 Pid 1890 on worker-1 device  3 [0x99] NVIDIA H100" (older: no Group).
void read_rank_line(RunText& r, const std::vector<std::string>& t, const std::string& at) {
  RankInfo info;
  info.rank = std::atoi(t[1].c_str());
  for (size_t i = 2; i + 1 < t.size(); ++i) {
    if (t[i] == "Group") info.group = std::atoi(t[i + 1].c_str());
    if (t[i] == "on") {
      info.host = t[i + 1];
      break;
    }
  }
  add_rank(r, info, at);
}

void read_columns(RunText& r, const std::vector<std::string>& t, int line, const std::string& file) {
  r.columns = t;
  r.columns_line = line;
  for (size_t i = 0; i < t.size(); ++i) {
    if (r.time_col < 0 && (t[i] == "time" || t[i] == "cputime")) r.time_col = int(i);
    if (r.wrong_col < 0 && t[i] == "#wrong") r.wrong_col = int(i);
  }
  if (r.time_col < 0) input_error(where(file, line) + ": the column header has no 'time' column");
}

void read_row(RunText& r, const std::vector<std::string>& t, int line, const std::string& file) {
  std::string at = where(file, line);
  if (t.size() < r.columns.size())
    input_error(at + ": a row of " + std::to_string(t.size()) + " columns where the header at line " +
                std::to_string(r.columns_line) + " has " + std::to_string(r.columns.size()) +
                " (a truncated log?)");
  double bytes = 0, time_us = 0;
  if (!parse_double(t[0], bytes)) input_error(at + ": size '" + t[0] + "' is not a number");
  if (!parse_double(t[size_t(r.time_col)], time_us) || time_us <= 0)
    input_error(at + ": out-of-place time '" + t[size_t(r.time_col)] + "' is not a positive number of µs");
  if (bytes == 0) return;  // nccl-tests' 0-byte rows time the launch alone
  double wrong = 0;
  if (r.wrong_col >= 0 && parse_double(t[size_t(r.wrong_col)], wrong) && wrong > 0) {
    r.run.notes.push_back(at + ": skipped " + t[0] + " bytes: nccl-tests reports " + t[size_t(r.wrong_col)] +
                          " wrong elements (#wrong)");
    return;
  }
  add_time(r.run, bytes, r.iters, {time_us * us});
}

void read_header(RunText& r, const std::vector<std::string>& t) {
  for (size_t i = 1; i + 1 < t.size(); ++i)
    if (t[i] == "iters:" && t[i - 1] != "warmup" && t[i - 1] != "agg") r.iters = std::atoi(t[i + 1].c_str());
}

std::vector<NcclTestsRun> parse_text(const std::string& text, const std::string& file, const NcclTestsOptions& o) {
  std::vector<RunText> runs;
  std::string version, program;  // printed just before the header they belong to
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  auto current = [&]() -> RunText& {
    if (runs.empty()) {  // a table with no header above it: read it anyway
      runs.emplace_back();
      runs.back().run.first_line = line;
    }
    return runs.back();
  };
  while (std::getline(in, raw)) {
    ++line;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::string s = strip_launcher_tag(raw);
    size_t first = s.find_first_not_of(" \t");
    if (first != std::string::npos && s[first] == '#') s = s.substr(first + 1);  // launchers may strip it
    std::vector<std::string> t = split_ws(s);
    if (t.empty()) continue;
    if (t[0] == "nccl-tests" && t.size() > 2 && t[1] == "version") {
      require_text(s, where(file, line));
      version = t[2];
    } else if (t[0] == "Collective" && t.size() > 3 && t[2] == "starting:") {
      program = t[3];
    } else if (t[0] == "nThread") {
      runs.emplace_back();
      RunText& r = runs.back();
      r.run.first_line = line;
      r.run.version = version;
      r.program = program;
      version.clear(), program.clear();
      read_header(r, t);
    } else if (t[0] == "Rank" && t.size() > 3 && all_digits(t[1])) {
      require_text(s, where(file, line));
      read_rank_line(current(), t, where(file, line));
    } else if (t[0] == "size" && std::find(t.begin(), t.end(), "busbw") != t.end()) {
      read_columns(current(), t, line, file);
    } else if (s.find("Avg bus bandwidth") != std::string::npos) {
      current().closed = true;
    } else if (!runs.empty() && !runs.back().columns.empty() && !runs.back().closed && all_digits(t[0]) &&
               t.size() > 1 && all_digits(t[1])) {
      read_row(runs.back(), t, line, file);
    }
    // Anything else (NCCL INFO lines, warnings, other ranks' output) is not ours.
  }

  std::vector<NcclTestsRun> out;
  for (auto& r : runs) {
    if (r.columns.empty()) continue;  // a header with no table (a duplicate, or a run that never started)
    std::string at = where(file, r.run.first_line);
    if (!r.closed)
      input_error(where(file, line) + ": the log ends without nccl-tests' closing '# Avg bus bandwidth' line of the "
                  "run at line " + std::to_string(r.run.first_line) + " (truncated, or the run was killed)");
    if (r.run.samples.empty())
      input_error(at + ": the run has no rows with a message size above 0 bytes to fit");
    r.run.file = file;
    finish(r.run, r.ranks, resolve_op(r, file, o), o);
    out.push_back(std::move(r.run));
  }
  if (out.empty())
    input_error(file + ": not nccl-tests output: no table headed 'size count type ... time algbw busbw' (" +
                std::to_string(line) + " lines read)");
  return out;
}

// nccl-tests -J: {"version", "start_time", "args": [argv], "config": {...,
// "iterations", "devices": [{"rank", "group", "hostname", ...}]}, "results":
// [{"size", "out_of_place": {"time" | "cpu_time", "nwrong", ...},
// "out_of_place_per_iter": {"times_us": [...]}, ...}]}.
std::vector<NcclTestsRun> parse_json(const std::string& text, const std::string& file, const NcclTestsOptions& o) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    size_t at = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    long line = 1 + std::count(text.begin(), text.begin() + long(at), '\n');
    input_error(where(file, int(line)) + ": malformed JSON (a truncated nccl-tests -J file?): " + e.what());
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double: 1e309
    input_error(file + ": malformed JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("results") || !j.contains("config")) {
    if (j.is_object() && j.contains("format"))
      input_error(file + ": a fourfold measurement record, not nccl-tests output: give it with --from");
    input_error(file + ": not nccl-tests -J output (no \"config\" and \"results\")");
  }
  Fields f(j, file);
  RunText r;
  r.run.file = file;
  Fields config = f.object("config");
  r.iters = int(config.integer_or("iterations", 1, 1));
  if (f.has("start_time")) r.run.date = f.string("start_time");
  if (f.has("args") && !f.array("args").empty() && f.array("args")[0].is_string())
    r.program = base_name(f.array("args")[0].get<std::string>());
  if (config.has("devices")) {
    const auto& d = config.array("devices");
    for (size_t i = 0; i < d.size(); ++i) {
      Fields dev(d[i], file, "config.devices[" + std::to_string(i) + "]");
      add_rank(r, {int(dev.integer("rank", 0)), int(dev.integer_or("group", 0, 0)), dev.string("hostname")},
               dev.where("rank"));
    }
  }
  const auto& results = f.array("results");
  for (size_t i = 0; i < results.size(); ++i) {
    Fields row(results[i], file, "results[" + std::to_string(i) + "]");
    double bytes = row.number("size");
    if (bytes <= 0) continue;
    Fields oop = row.object("out_of_place");
    std::string key = oop.has("time") ? "time" : "cpu_time";
    double t = oop.positive(key);
    if (oop.has("nwrong") && oop.number("nwrong") > 0) {
      r.run.notes.push_back(row.where("out_of_place.nwrong") + ": skipped " + std::to_string((long long)bytes) +
                            " bytes: nccl-tests reports wrong elements");
      continue;
    }
    // Per-iteration times (-I 1) are repeats of one operation each.
    std::vector<double> seconds{t * us};
    int iters = r.iters;
    if (row.has("out_of_place_per_iter")) {
      Fields per = row.object("out_of_place_per_iter");
      if (per.has("times_us") && !per.array("times_us").empty()) {
        seconds.clear();
        for (const auto& x : per.array("times_us")) {
          if (!x.is_number() || !(x.get<double>() > 0)) per.fail("times_us", "an array of times in µs > 0");
          seconds.push_back(x.get<double>() * us);
        }
        iters = 1;
      }
    }
    add_time(r.run, bytes, iters, seconds);
  }
  if (r.run.samples.empty()) input_error(file + ": field 'results' holds no message size above 0 bytes to fit");
  finish(r.run, r.ranks, resolve_op(r, file, o), o);
  return {r.run};
}

}  // namespace

std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text, const std::string& file,
                                           const NcclTestsOptions& options) {
  if (options.gpus_per_node < 1) input_error(file + ": the ranks per node (--gpus-per-node) must be given, >= 1");
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parse_json(text, file, options);
  return parse_text(text, file, options);
}

std::vector<NcclTestsRun> read_nccl_tests(const std::string& path, const NcclTestsOptions& options) {
  std::ifstream in(path);
  if (!in) input_error(path + ": cannot open (does the file exist and is it readable?)");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_nccl_tests(buf.str(), path, options);
}

Measurement measurement_from_nccl_tests(const std::vector<NcclTestsRun>& runs, int gpus_per_node,
                                        const std::string& command) {
  Measurement m;
  m.backend = "nccl-tests";
  m.gpus_per_node = gpus_per_node;
  m.command = command;
  std::set<std::string> hosts, versions;
  for (const auto& run : runs) {
    m.ranks = std::max({m.ranks, run.ranks, run.geometry.size});
    hosts.insert(run.hosts.begin(), run.hosts.end());
    if (!run.version.empty()) versions.insert(run.version);
    if (m.host.empty() && !run.hosts.empty()) m.host = run.hosts.front();
    if (m.date.empty()) m.date = run.date;
    for (const auto& s : run.samples) merge_sample(m.collectives, s);
  }
  m.nodes = hosts.empty() ? (m.ranks + gpus_per_node - 1) / gpus_per_node : int(hosts.size());
  std::string v;
  for (const auto& x : versions) v += (v.empty() ? "" : ", ") + x;
  if (!v.empty()) m.versions["nccl-tests"] = v;
  return m;
}

}  // namespace ff
