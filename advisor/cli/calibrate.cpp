// advisor calibrate: a machine profile fitted from measurements — records
// `measure` wrote, profiles that keep one in "raw", nccl-tests logs.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "advisor/calibration/calibrate.hpp"
#include "advisor/calibration/nccl_tests_log.hpp"
#include "advisor/calibration/refit.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/atomic_file.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/format.hpp"
#include "advisor/validation/validation_report.hpp"

namespace ff::advisor {

namespace {

struct CalibrateOptions {
  std::string base, out, name, op;
  std::vector<std::string> from, nccl_logs;
  std::string from_runs;
  int gpus_per_node = 0;
  long long stride = 0;
  int size = 0, groups_per_node = 0;
  bool json = false;
};

NcclTestsOptions log_options(const CalibrateOptions& o) {
  if (o.gpus_per_node < 1) input_error("--from-nccl-tests needs --gpus-per-node N (the ranks a node holds)");
  NcclTestsOptions n;
  n.gpus_per_node = o.gpus_per_node;
  if (o.stride > 0 && o.groups_per_node > 0) input_error("--stride is for a group inside a node, --groups-per-node for one across nodes: give one");
  if (o.stride > 0 || o.groups_per_node > 0) {
    Geometry g;
    g.inter = o.groups_per_node > 0;
    g.stride = o.stride > 0 ? o.stride : 1;
    g.groups_per_node = o.groups_per_node > 0 ? o.groups_per_node : 1;
    g.size = o.size;  // 0: the ranks the log lists
    n.geometry = g;
  } else {
    n.size = o.size;
  }
  if (!o.op.empty()) {
    Coll c;
    if (!coll_from_name(o.op, c)) input_error("--op '" + o.op + "': expected all-reduce, all-gather or reduce-scatter");
    n.op = c;
  }
  return n;
}

std::string percent(double v) { return fixed(100 * v, 1) + "%"; }

std::string ops_text(const nlohmann::json& e) {
  std::string s;
  if (e.contains("fit"))
    for (const auto& o : e["fit"]["ops"]) s += (s.empty() ? "" : ",") + o.get<std::string>();
  return s;
}

void print_report(const nlohmann::json& p, const CalibrateOptions& o, const std::vector<std::string>& notes) {
  std::cout << "Profile " << p["name"].get<std::string>() << " -> " << o.out << " (base: "
            << (o.base.empty() ? "none, a CPU-rank profile" : o.base) << ")\n\n";
  Table t({"<tier", "<geometry", "<collectives", "α µs", "busbw GB/s", "rel rms", "points"});
  // Slow links (CPU ranks over TCP) need more than one decimal of GB/s.
  auto gbps = [](double v) { return fixed(v, v < 1 ? 4 : 1); };
  auto rows = [&](const char* tier, const nlohmann::json& section, const char* key) {
    for (const auto& e : section.value("table", nlohmann::json::array())) {
      if (!e.contains("fit")) continue;  // kept from the base, not fitted here
      int members = e.value("members_per_node", 1);
      std::string geo = std::string(key) == "stride"
                            ? "stride " + std::to_string(e["stride"].get<long long>()) + ", size " + std::to_string(e["size"].get<int>())
                            : "size " + std::to_string(e["size"].get<int>()) + ", " +
                                  std::to_string(e["groups_per_node"].get<int>()) + " per node" +
                                  (members > 1 ? ", " + std::to_string(members) + " members each" : "") +
                                  (e.contains("rings_per_uplink")
                                       ? ", " + std::to_string(e["rings_per_uplink"].get<int>()) + " an uplink"
                                       : "");
      t.row({tier, geo, ops_text(e), fixed(e["alpha_us"].get<double>(), 2), gbps(e["busbw_GBps"].get<double>()),
             percent(e["fit"]["rel_rms"].get<double>()), std::to_string(e["fit"]["points"].get<int>())});
      // Each collective's own figures, which the advisor prices it with.
      for (auto [field, form] : {std::pair{"by_op", ""}, std::pair{"nonblocking_by_op", ", non-blocking"}}) {
        if (!e.contains(field)) continue;
        for (const auto& [op, f] : e[field].items())
          t.row({"", "", "  " + op + form, fixed(f["alpha_us"].get<double>(), 2), gbps(f["busbw_GBps"].get<double>()),
                 f.contains("fit") ? percent(f["fit"]["rel_rms"].get<double>()) : "",
                 f.contains("fit") ? std::to_string(f["fit"]["points"].get<int>()) : ""});
      }
    }
  };
  rows("intra", p["intra_node"], "stride");
  rows("inter", p["inter_node"], "groups_per_node");
  if (t.empty()) std::cout << "  no collective measured: the links are the base's\n";  // one rank
  else std::cout << t.str("  ");
  const auto& g = p["gemm"];
  std::cout << "\n  GEMM table " << g["m"].size() << "×" << g["n"].size() << "×" << g["k"].size() << " (m×n×k), "
            << g.value("kind", std::string("kind not stated")) << "; peak";
  // The dtypes the profile gives (a V100 profile has fp16 and no bf16).
  for (const auto& [dt, tflops] : p["compute"]["peak_tflops"].items())
    std::cout << " " << dt << " " << fixed(tflops.get<double>(), 2);
  std::cout << " TFLOP/s\n";
  std::cout << "  intra default: α " << fixed(p["intra_node"]["default"]["alpha_us"].get<double>(), 2) << " µs, busbw "
            << fixed(p["intra_node"]["default"]["busbw_GBps"].get<double>(), 1) << " GB/s; inter node: α "
            << fixed(p["inter_node"]["alpha_us"].get<double>(), 2) << " µs, busbw "
            << fixed(p["inter_node"]["node_busbw_GBps"].get<double>(), 1) << " GB/s ("
            << p["inter_node"].value("kind", std::string("kind not stated")) << ")\n";
  auto kind = [](const nlohmann::json& e, const nlohmann::json& section) {
    return e.value("kind", section.value("kind", std::string("kind not stated")));
  };
  if (p.contains("p2p")) {
    const auto& s = p["p2p"];
    auto pair = [&](const char* tier) {
      const auto& e = s[tier];
      return "α " + fixed(e["alpha_us"].get<double>(), 2) + " µs, " + gbps(e["bw_GBps"].get<double>()) + " GB/s each way (" +
             kind(e, s) + ")";
    };
    std::cout << "  pairs (send-recv): inside a node " << pair("intra_node") << "; across nodes " << pair("inter_node") << "\n";
  }
  if (p.contains("host")) {
    const auto& h = p["host"];
    std::cout << "  host link: " << gbps(h["link_GBps"].get<double>()) << " GB/s each way one GPU alone";
    if (h.contains("node_link_GBps")) std::cout << ", " << gbps(h["node_link_GBps"].get<double>()) << " GB/s a node in all";
    std::cout << "; host memory " << fixed(h["memory_GiB"].get<double>(), 1) << " GiB a node (" << kind(h, h) << ")\n";
  }
  // How the links were waited for: a paced validation needs its own Δ.
  if (p.contains("poll_us")) {
    double us = p["poll_us"].get<double>();
    std::cout << "  MPI waits: " << (us > 0 ? "MPI_Test + sleep " + fixed(us, us == std::floor(us) ? 0 : 1) + " µs (measure --poll-us)"
                                             : std::string("MPI_Wait (measure --poll-us 0)"))
              << "\n";
  }
  if (p.contains("gap_us")) {
    double us = p["gap_us"].get<double>();
    std::cout << "  timed: " << (us > 0 ? "each operation alone after " + fixed(us, us == std::floor(us) ? 0 : 1) + " µs idle (measure --gap-us)"
                                        : std::string("back to back (measure --gap-us 0)"))
              << "\n";
  }
  // The errors each configuration's range is priced at (MODEL.md §8, "Ranges").
  std::cout << "  ranges: " << ff::range_basis(ff::machine_from_json(p, o.out)) << "\n";
  for (const auto& n : notes) std::cout << "  note: " << n << "\n";
}

nlohmann::json report_json(const nlohmann::json& p, const CalibrateOptions& o, const std::vector<std::string>& notes) {
  nlohmann::json fits = nlohmann::json::array();
  for (const char* tier : {"intra_node", "inter_node"})
    for (const auto& e : p[tier].value("table", nlohmann::json::array())) {
      if (!e.contains("fit")) continue;
      nlohmann::json r = e;
      r["tier"] = std::string(tier) == "intra_node" ? "intra" : "inter";
      fits.push_back(r);
    }
  return {{"name", p["name"]},
          {"out", o.out},
          {"base", o.base.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.base)},
          {"fits", fits},
          {"intra_default", p["intra_node"]["default"]},
          {"inter_node", {{"alpha_us", p["inter_node"]["alpha_us"]}, {"node_busbw_GBps", p["inter_node"]["node_busbw_GBps"]},
                          {"kind", p["inter_node"].value("kind", "")}}},
          {"gemm", {{"m", p["gemm"]["m"]}, {"n", p["gemm"]["n"]}, {"k", p["gemm"]["k"]}, {"kind", p["gemm"].value("kind", "")}}},
          {"notes", notes}};
}

// The profile's few free parameters refitted to measured training runs (an
// `advisor validate` report). In sample by construction: validate is where
// the error is scored on runs the fit did not see.
void run_from_runs(const CalibrateOptions& o) {
  if (!o.from.empty() || !o.nccl_logs.empty())
    input_error("--from-runs refits a profile to training runs; it does not combine with --from or --from-nccl-tests");
  nlohmann::json report = read_json_file(o.from_runs);
  ReportRuns rr = read_report_runs(report, o.from_runs);
  if (rr.runs.empty()) input_error(o.from_runs + ": no successful runs to fit to");
  std::string origin = o.from_runs + ": machine_profile";
  nlohmann::json base = rr.machine_profile;
  if (!o.base.empty()) base = profile_json(o.base), origin = o.base;
  MachineProfile m = machine_from_json(base, origin);
  RefitResult r = refit(rr.job, m, rr.runs);
  std::string name = o.name.empty() ? std::filesystem::path(o.out).stem().string() : o.name;
  nlohmann::json source = {{"report", o.from_runs}, {"base", o.base.empty() ? "the report's machine_profile" : o.base},
                           {"runs", rr.keys}, {"model", rr.job.model.name}, {"ranks", rr.job.gpus}};
  nlohmann::json profile = fitted_profile_json(base, r, name, source);
  machine_from_json(profile, o.out);  // never write what the advisor could not load
  write_file_atomic(o.out, profile.dump(2) + "\n");
  if (o.json) {
    std::cout << profile["fitted"].dump(2) << "\n";
    return;
  }
  std::cout << "Profile " << name << " -> " << o.out << ": " << m.name << " refitted to " << rr.runs.size()
            << " measured runs of " << rr.job.model.name << " on " << rr.job.gpus << " ranks\n\n";
  Table t({"<parameter", "value", "<"});
  for (Knob k : kKnobs)
    t.row({knob_name(k), fixed(r.factors[k], 3),
           !r.fitted[size_t(k)]   ? "held: " + r.held_because[size_t(k)]
           : r.at_bound[size_t(k)] ? "fitted, at its bound: the runs do not pin it"
                                   : "fitted"});
  std::cout << t.str("  ") << "\n  rms of log(predicted/measured) time per step: " << fixed(r.rms_before, 3) << " -> "
            << fixed(r.rms_after, 3) << " (in sample: these runs were fitted; advisor validate scores out of sample)\n";
}

void run(const CalibrateOptions& o) {
  if (!o.from_runs.empty()) return run_from_runs(o);
  if (o.from.empty() && o.nccl_logs.empty()) input_error("nothing to calibrate from: give --from RUN.json, --from-nccl-tests LOG or --from-runs REPORT.json");
  std::vector<Measurement> ms;
  std::vector<std::string> notes;
  for (const auto& f : o.from) ms.push_back(measurement_from_json(read_json_file(f), f));
  if (!o.nccl_logs.empty()) {
    NcclTestsOptions n = log_options(o);
    std::vector<NcclTestsRun> runs;
    std::string files;
    for (const auto& f : o.nccl_logs) {
      for (auto& r : read_nccl_tests(f, n)) {
        notes.push_back(f + ": " + coll_name(r.op) + ", " + std::to_string(r.samples.size()) + " sizes, geometry " +
                        r.geometry_from);
        notes.insert(notes.end(), r.notes.begin(), r.notes.end());
        runs.push_back(std::move(r));
      }
      files += (files.empty() ? "" : " ") + f;
    }
    ms.push_back(measurement_from_nccl_tests(runs, o.gpus_per_node, "nccl-tests logs " + files));
  }
  Measurement m = merge_measurements(ms);
  if (o.gpus_per_node > 0 && m.gpus_per_node != o.gpus_per_node)
    input_error("--gpus-per-node " + std::to_string(o.gpus_per_node) + " but the measurement was placed " +
                std::to_string(m.gpus_per_node) + " ranks per node");
  nlohmann::json base = o.base.empty() ? nlohmann::json(nullptr) : profile_json(o.base);
  std::string name = o.name.empty() ? std::filesystem::path(o.out).stem().string() : o.name;
  nlohmann::json profile = calibrate_profile(base, m, name);
  for (const std::string& n : fit_notes(profile)) notes.push_back(n);
  write_file_atomic(o.out, profile.dump(2) + "\n");
  if (o.json) std::cout << report_json(profile, o, notes).dump(2) << "\n";
  else print_report(profile, o, notes);
}

}  // namespace

void setup_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* sub = app.add_subcommand("calibrate", "Fit a machine profile from measurements (measure records, nccl-tests logs, validated runs)");
  sub->add_option("--base", o->base,
                  "Profile (bundled name or file) to take what the measurement does not cover from; default: none, "
                  "a CPU-rank profile from the measurement alone");
  sub->add_option("--from", o->from, "Measurement record(s) from measure, or profiles keeping one in \"raw\"");
  sub->add_option("--from-runs", o->from_runs,
                  "An `advisor validate` report: refit bandwidths, latency, compute speed and overlap to its runs");
  sub->add_option("--from-nccl-tests", o->nccl_logs, "nccl-tests output: text logs or -J JSON (all_reduce/all_gather/reduce_scatter_perf)");
  sub->add_option("--gpus-per-node", o->gpus_per_node, "Ranks a node holds (needed with --from-nccl-tests)");
  sub->add_option("--stride", o->stride, "nccl-tests: the logs' groups are inside a node, members this many ranks apart");
  sub->add_option("--size", o->size, "nccl-tests: ranks per group (default: the ranks the log lists)");
  sub->add_option("--groups-per-node", o->groups_per_node, "nccl-tests: the logs' groups span nodes, this many sharing each node");
  sub->add_option("--op", o->op, "nccl-tests: the collective, when neither the log nor its file name says");
  sub->add_option("-o,--out", o->out, "Profile JSON to write (atomically)")->required();
  sub->add_option("--name", o->name, "Profile name (default: the output file's stem)");
  sub->add_flag("--json", o->json, "Print what was fitted as JSON");
  sub->callback([o] { run(*o); });
}

}  // namespace ff::advisor
