// advisor validate: run the engine on the configurations of one job and hold
// the measured time per step against the prediction (MODEL.md §8), in sample
// and, after refitting on one half, out of sample on the other. On the paced
// device (MODEL.md §11) compute is known by construction: the profile's compute
// is the pace's, and the communication part is scored on its own.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "advisor/cli/child_process.hpp"
#include "advisor/cli/filter_options.hpp"
#include "advisor/cli/job_options.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/atomic_file.hpp"
#include "advisor/core/engine_args.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"
#include "advisor/core/measurement.hpp"
#include "advisor/core/option_groups.hpp"
#include "advisor/model/search.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/format.hpp"
#include "advisor/validation/run_record.hpp"
#include "advisor/validation/validation_placement.hpp"
#include "advisor/validation/validation_plan.hpp"
#include "advisor/validation/validation_report.hpp"
#include "advisor/validation/validation_scores.hpp"
#include "advisor/validation/validation_stats.hpp"

namespace ff::advisor {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ValidateOptions {
  std::string model, machine, launcher, engine, out, plot, logs;
  long long ranks = 0, batch = 0;
  int steps = 5, max_configs = 64, max_micro_batch = 16, repeats = 3;
  unsigned long long seed = 1;
  bool resume = false, json = false;
  FilterFlags filters;
  double run_timeout = 300;
  std::string device = "cpu";
  PaceFlags pace;
  std::string pace_flag;  // the first --pace-*/--poll-us given, if any (refused without --device paced)
};

// Everything fixed before the first run.
struct Setup {
  Job job;
  MachineProfile machine;
  json machine_json;     // what the predictions use: on the paced device, the pace in place of compute
  std::string device;    // the engine's --device
  DevicePace pace;       // its pace, when paced
  json device_json;      // the report's "device"
  std::vector<std::string> launcher;
  std::string engine, model_path, logs;
  SearchOptions filters;  // which configurations run
};

// A number of µs as a person writes it: 50, 12.5.
std::string micros_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", us);
  return buf;
}

std::string engine_path(const std::string& given) {
  if (!given.empty()) {
    std::string p = find_program(given);
    if (p.empty()) input_error("--engine " + given + ": not an executable file (nor on PATH)");
    return fs::absolute(p).string();
  }
  // The engine of the same build: <build>/advisor/advisor → <build>/engine/engine.
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path sibling = self.parent_path().parent_path() / "engine" / "engine";
    if (!find_program(sibling.string()).empty()) return sibling.string();
  }
  std::string p = find_program("engine");
  if (p.empty())
    input_error("no engine found next to this advisor (../engine/engine) or on PATH; build it (ninja engine/engine) "
                "or give --engine PATH");
  return fs::absolute(p).string();
}

Setup setup(const ValidateOptions& o) {
  if (o.ranks < 1) input_error("--ranks " + std::to_string(o.ranks) + ": expected at least 1 rank");
  if (o.steps < 2) input_error("--steps " + std::to_string(o.steps) + ": expected at least 2 (the first is discarded)");
  if (o.repeats < 1) input_error("--repeats " + std::to_string(o.repeats) + ": expected at least 1");
  if (o.max_configs < 1) input_error("--max-configs " + std::to_string(o.max_configs) + ": expected at least 1");
  if (!(o.run_timeout > 0)) input_error("--run-timeout: expected seconds > 0");
  if (o.batch < 0) input_error("--batch " + std::to_string(o.batch) + ": expected sequences >= 1");
  Setup s;
  s.job.model = load_model(o.model);
  s.job.gpus = o.ranks;
  s.job.batch = o.batch > 0 ? o.batch : 2 * o.ranks;
  s.job.dtype = Dtype::FP32;  // the CPU engine computes in fp32
  // Priced as the engine computes: its kernels, and the attention the model
  // file names (flash, the default, runs in tiles on every device but a GPU
  // past head size 128, which validate never plans).
  s.job.fusion = Fusion::Engine;
  std::string origin;
  s.machine_json = machine_json(o.machine.empty() ? default_machine() : o.machine, origin);
  s.machine = machine_from_json(s.machine_json, origin);
  s.device = o.device;
  s.device_json = {{"name", o.device}};
  if (o.device == "paced") {
    check_pace(o.pace);
    s.pace = pace_of(o.pace);
    // The links must have been measured the way the paced engine waits:
    // every MPI wait MPI_Test + sleep Δ, a sleeping rank making no progress.
    const std::string pace_poll = micros_text(o.pace.poll_us);
    if (s.machine.poll_s && std::abs(*s.machine.poll_s - s.pace.poll_s) > 1e-9) {
      const double had = *s.machine.poll_s * 1e6;
      input_error("--machine " + origin + ": its links were measured with poll_us " + micros_text(had) +
                  (had > 0 ? "" : " (MPI_Wait)") + ", but the paced engine waits with --poll-us " + pace_poll +
                  ": the collectives would be priced for another wait; measure again with `measure --backend mpi "
                  "--poll-us " + pace_poll + "`" + (had > 0 ? " or give --poll-us " + micros_text(had) : ""));
    }
    if (!s.machine.poll_s)
      std::cerr << "advisor: warning: " << origin << " does not say how its links were waited for (no poll_us); the "
                << "paced engine polls every " << pace_poll << " us, so measure with `measure --backend mpi "
                << "--poll-us " << pace_poll << "` for a profile that prices its waits\n";
    s.machine_json = paced_profile_json(s.machine_json, s.pace);
    s.machine = machine_from_json(s.machine_json, origin + " on the paced device");
    s.device_json["pace"] = s.machine_json["paced_device"];
  } else if (o.device != "cpu") {
    input_error("--device '" + o.device + "': expected cpu (the engine computes on the host) or paced (MODEL.md §11)");
  } else if (!o.pace_flag.empty()) {
    input_error(o.pace_flag + " describes the paced device: give --device paced with it");
  } else if (s.machine.poll_s && *s.machine.poll_s > 0) {
    std::cerr << "advisor: warning: " << origin << "'s links were measured polling every "
              << micros_text(*s.machine.poll_s * 1e6) << " us (poll_us), but the cpu engine waits in MPI_Wait\n";
  }
  s.filters = search_filters(o.filters, s.job, s.machine, /*state_when_asked=*/true);
  s.launcher = split_words(o.launcher);
  if (s.launcher.empty()) input_error("--launcher is empty: give e.g. \"mpirun -np " + std::to_string(o.ranks) + "\"");
  if (find_program(s.launcher[0]).empty())
    input_error("--launcher: '" + s.launcher[0] + "' not found (not an executable file, nor on PATH)");
  s.engine = engine_path(o.engine);
  s.model_path = fs::exists(o.model) ? fs::absolute(o.model).string() : o.model;
  s.logs = o.logs.empty() ? o.out + ".runs" : o.logs;
  return s;
}

// --- one run ---------------------------------------------------------------

// The prediction a run is scored against, with its range (MODEL.md §8).
json predicted_of(const Job& job, const MachineProfile& m, const Config& c) {
  const Prediction p = predict(job, m, c);
  const PredictedRange range = predicted_range(job, m, c);
  const Estimate& e = p.estimate;
  return {{"time_s", e.time_s}, {"compute_s", e.compute_s}, {"sync_s", e.sync_s},
          {"exposed_comm_s", per_axis_json(e.exposed_comm_s)},
          {"comm_s", per_axis_json(e.comm_s)}, {"memory_gib", p.memory.total() / 1073741824.0},
          {"range_s", {range.low, range.high}}};
}

std::string file_stem(const std::string& key) {
  std::string s = key;
  for (char& c : s)
    if (c == ' ') c = '_';
    else if (c == ',') c = '-';
  return s;
}

std::string duration_text(double s) {
  long t = long(std::lround(s));
  return t >= 60 ? std::to_string(t / 60) + "m" + std::to_string(t % 60) + "s" : std::to_string(t) + "s";
}

// One run of one configuration: repeat `repeat` of it, with its own log and
// record so every repeat can be looked at afterwards.
json run_repeat(const Setup& s, const ValidateOptions& o, const Config& c, int repeat) {
  const std::string stem = (fs::path(s.logs) / (file_stem(config_label(c)) + "_r" + std::to_string(repeat))).string();
  const std::string log = stem + ".log", rec = stem + ".json";
  fs::remove(rec);
  fs::remove(log);
  EngineArgs args = engine_args(s.model_path, c, s.job.batch, nullptr, "cpu", s.job.grad_dtype);
  args.device = s.device;
  if (s.device == "paced") set_pace(args, s.pace);  // spelled out on every launch line
  // Offload as MODEL.md §9 prices it, AxoNN's CPUAdam's way: no clipping,
  // so each chunk's optimizer and copies run under the chunks in flight.
  if (c.offload) args.clip = 0;
  args.steps = o.steps;
  args.record = rec;
  args.quiet = true;
  std::vector<std::string> argv = s.launcher;
  argv.push_back(s.engine);
  for (std::string& a : engine_argv(args)) argv.push_back(std::move(a));
  const std::string command = join_args(argv);

  json r = {{"repeat", repeat}, {"log", log}, {"record", rec}, {"command", command}};
  ChildOutcome out = run_logged(argv, log, o.run_timeout);
  r["wall_s"] = out.seconds;
  std::string error;
  if (out.interrupted) error = "interrupted";
  else if (out.timed_out) error = "timed out after " + fixed(o.run_timeout, 0) + " s (--run-timeout)";
  else if (out.signal) error = "ended by signal " + std::to_string(out.signal);
  else if (out.exit_code != 0) error = "exit code " + std::to_string(out.exit_code);
  else if (!fs::exists(rec)) error = "exited 0 but wrote no record";
  if (error.empty()) {
    try {
      r.update(record_measured(rec, c, s.device, engine_grad_dtype(args)));
    } catch (const std::exception& e) {  // InputError, or whatever else a bad record may raise
      error = e.what();
    }
  }
  r["status"] = error.empty() ? "ok" : (out.interrupted ? "interrupted" : "failed");
  if (!error.empty()) r["error"] = error, r["log_tail"] = file_tail(log, 15);
  return r;
}

// --- progress and the report -----------------------------------------------

void print_progress(int pass, const ValidateOptions& o, size_t k, size_t n, const Config& c, const json& rep,
                    const json& run, double elapsed, double left) {
  std::cerr << "[pass " << pass << "/" << o.repeats << ", " << k << "/" << n << "] grid " << c.grid.label() << " "
            << c.order.str() << " mb " << c.micro_batch << " " << recompute_name(c.recompute) << " recompute "
            << c.overlap.str() << (c.virtual_stages > 1 ? " v" + std::to_string(c.virtual_stages) : "") << ": ";
  if (rep["status"] == "ok") {
    std::cerr << seconds(rep["time_s"].get<double>()) << " measured";
    const json& m = run["measured"];
    if (m.value("repeats_ok", 1) > 1)
      std::cerr << " (median of " << m["repeats_ok"] << ": " << seconds(m["time_s"].get<double>()) << ")";
    std::cerr << ", " << seconds(run["predicted"]["time_s"].get<double>()) << " predicted";
  } else {
    std::cerr << "FAILED (" << rep["error"].get<std::string>() << "); log " << rep["log"].get<std::string>()
              << ", its end:\n"
              << rep["log_tail"].get<std::string>();
  }
  std::cerr << " (elapsed " << duration_text(elapsed) << ", ~" << duration_text(left) << " left)\n";
}

void run(const ValidateOptions& o) {
  const Setup s = setup(o);
  std::map<std::string, int> skipped;
  std::vector<std::vector<Config>> by_grid = feasible_by_grid(s.job, s.machine, s.filters, skipped);
  std::vector<Config> feasible;
  for (const auto& cs : by_grid) feasible.insert(feasible.end(), cs.begin(), cs.end());
  if (feasible.empty()) {
    std::string why;
    for (const auto& [k, n] : skipped) why += "\n  " + std::to_string(n) + ": " + k;
    input_error("no configuration of " + s.job.model.name + " on " + std::to_string(s.job.gpus) + " ranks with batch " +
                std::to_string(s.job.batch) + " can run on the engine:" + why);
  }
  const PlacementCheck pc = placement_check(s.job, s.machine, feasible);
  const std::vector<Config> plan = plan_of(by_grid, o.seed, o.max_configs, pc);
  const bool sampled = feasible.size() > size_t(o.max_configs);

  json report = {{"format", "fourfold-validation/2"},
                 {"job", job_json(s.job, o.model, o.steps)},
                 {"repeats", o.repeats},
                 {"machine", o.machine.empty() ? default_machine() : o.machine},
                 {"machine_profile", s.machine_json},
                 {"device", s.device_json},
                 {"launcher", o.launcher},
                 {"engine", s.engine},
                 {"sampled", sampled},
                 {"sample", {{"feasible", feasible.size()}, {"grid_shapes", by_grid.size()}, {"planned", plan.size()},
                             {"seed", o.seed}, {"max_configs", o.max_configs},
                             {"rule", "round-robin over grid shapes, each shape's configurations in a seeded shuffle "
                                      "(mt19937_64); the first max_configs, with the placement check's top pick "
                                      "(first) and counterpart (right after it) moved in when they would be left out"}}},
                 {"runs", json::array()}};
  if (o.resume && fs::exists(o.out)) {
    report["runs"] = kept_runs(load_resumed(o.out, report));
    // Priced by this advisor, as the scores are: a report resumed after the
    // model changed then shows the predictions it scores.
    for (json& r : report["runs"])
      r["predicted"] = predicted_of(s.job, s.machine, config_from_json(r["config"], o.out));
  } else if (fs::exists(o.out)) {
    input_error(o.out + " exists: --resume to continue that validation, or remove it");
  }
  fs::create_directories(s.logs);

  std::cerr << "advisor: " << feasible.size() << " configurations of " << s.job.model.name << " on " << s.job.gpus
            << " ranks (batch " << s.job.batch << ") the engine can run, over " << by_grid.size() << " grid shapes";
  if (sampled)
    std::cerr << "; measuring a stated sample of " << plan.size() << " (seed " << o.seed
              << ": round-robin over shapes, each shape's configurations shuffled)";
  std::cerr << "; " << o.repeats << " repeat" << (o.repeats > 1 ? "s" : "") << " each, in interleaved passes\n";

  // Where each configuration's entry is, and the repeats it still needs.
  std::map<std::string, size_t> index;
  size_t kept_repeats = 0;
  for (size_t i = 0; i < report["runs"].size(); ++i) {
    index[report["runs"][i]["key"].get<std::string>()] = i;
    kept_repeats += report["runs"][i]["repeats"].size();
  }
  std::vector<std::vector<int>> missing(plan.size());
  size_t todo = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    std::vector<int> finished;
    if (auto it = index.find(config_label(plan[k])); it != index.end())
      for (const auto& r : report["runs"][it->second]["repeats"]) finished.push_back(r.value("repeat", 0));
    missing[k] = missing_repeats(finished, o.repeats);
    todo += missing[k].size();
  }
  if (!report["runs"].empty())
    std::cerr << "advisor: resuming: " << report["runs"].size() << " finished runs kept from " << o.out << " ("
              << kept_repeats << " repeats); " << todo << " more to run\n";

  auto save = [&] {
    report["summary"] = summary_json(ok_runs(report["runs"], s.job, s.machine));
    report["summary"]["median_spread"] = median_spread(report["runs"]);
    report["placement"] = placement_json(pc, report["runs"]);
    write_file_atomic(o.out, report.dump(2) + "\n");
  };
  catch_interrupts();
  auto t0 = std::chrono::steady_clock::now();
  size_t ran = 0;
  // Pass p runs repeat p of every configuration, in plan order: a drift of
  // the machine over minutes then touches every configuration alike.
  for (int pass = 1; pass <= o.repeats && !interrupted(); ++pass)
    for (size_t k = 0; k < plan.size() && !interrupted(); ++k) {
      if (!std::count(missing[k].begin(), missing[k].end(), pass)) continue;
      const Config& c = plan[k];
      const std::string key = config_label(c);
      json rep = run_repeat(s, o, c, pass);
      if (rep["status"] == "interrupted") break;
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, report["runs"].size()).first;
        report["runs"].push_back({{"key", key},
                                  {"config", to_json(c)},
                                  {"predicted", predicted_of(s.job, s.machine, c)},
                                  {"repeats", json::array()}});
      }
      json& run = report["runs"][it->second];
      run["repeats"].push_back(rep);
      summarize_run(run);
      save();
      ++ran;
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      print_progress(pass, o, k + 1, plan.size(), c, rep, run, elapsed, elapsed / double(ran) * double(todo - ran));
    }
  if (interrupted()) {
    save();
    std::cerr << "advisor: interrupted; " << report["runs"].size() << " runs with finished repeats are in " << o.out
              << "; --resume continues\n";
    std::exit(130);
  }

  OkRuns ok = ok_runs(report["runs"], s.job, s.machine);
  report["out_of_sample"] = out_of_sample_json(s.job, s.machine, ok);
  save();
  if (!o.plot.empty()) write_validation_plot(o.plot, s.job, s.machine, ok, report["placement"]);
  if (o.json) std::cout << report.dump(2) << "\n";
  else print_validation_text(report);
  size_t failed = 0, total = 0;
  for (const auto& r : report["runs"])
    for (const auto& rep : r["repeats"]) {
      failed += rep["status"] != "ok";
      ++total;
    }
  if (failed) {
    // Everything is kept; the exit code tells a script that not all ran.
    std::cerr << "advisor: " << failed << " of " << total << " runs of the engine failed (see \"error\" and \"log\" "
              << "under \"repeats\" in " << o.out << "); --resume retries them\n";
    std::exit(1);
  }
}

}  // namespace

void setup_validate(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Run the engine on the configurations of a job; report predicted vs measured, in and out of sample");
  sub->add_option("--model", o->model, "A preset or a model JSON file")->required();
  sub->add_option("--ranks", o->ranks, "Ranks (GPUs) every run uses")->required();
  sub->add_option("--machine", o->machine,
                  std::string("The profile predictions use: bundled name or JSON file [") + default_machine() + "]");
  sub->add_option("--batch", o->batch, "Sequences per step [2 × ranks]");
  sub->add_option("--steps", o->steps, "Steps per run; the first is discarded")->capture_default_str();
  sub->add_option("--launcher", o->launcher,
                  "Command prefix that starts the ranks, split like a shell would: \"mpirun -np 8\", "
                  "\"srun -N 4 --ntasks-per-node 4\", …")
      ->required();
  sub->add_option("--engine", o->engine, "The engine binary [the build's engine/engine, else engine on PATH]");
  sub->add_option("-o,--out", o->out, "Report JSON, rewritten (atomically) after every run")->required();
  sub->add_option("--plot", o->plot, "Write predicted vs measured and the top breakdowns as SVG");
  sub->add_option("--logs", o->logs, "Directory for each run's log and record [OUT.runs]");
  sub->add_flag("--resume", o->resume,
                "Continue the report in --out: keep its finished repeats, run the missing ones (also to add repeats)");
  sub->add_option("--repeats", o->repeats,
                  "Runs per configuration, in interleaved passes; the report holds their median")
      ->capture_default_str();
  sub->add_option("--max-configs", o->max_configs, "At most this many configurations (a stated sample beyond)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the sample's shuffle")->capture_default_str();
  add_filter_options(*sub, o->filters);
  sub->add_option("--run-timeout", o->run_timeout, "Seconds before a run is stopped and recorded as failed")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the report as JSON instead of a table");
  sub->add_option("--device", o->device,
                  "The engine's device: cpu (computes on the host), or paced (MODEL.md §11: each kernel completes on a "
                  "virtual clock at the --pace-* rates, MPI waits poll every --poll-us; the predictions use the "
                  "pace for compute and the communication part is scored on its own)")
      ->capture_default_str();
  add_pace_options(*sub, o->pace);
  sub->callback([o, sub] {
    o->pace_flag = pace_flag_given(*sub);
    run(*o);
  });
}

}  // namespace ff::advisor
