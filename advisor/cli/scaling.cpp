// advisor scaling: the best configuration at each GPU count of a sweep, what
// each doubling buys, and what a deadline or a GPU-hour budget should ask for.
#include <iostream>
#include <locale>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "advisor/cli/scaling_sweep.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/atomic_file.hpp"
#include "advisor/core/error.hpp"
#include "advisor/model/scaling.hpp"
#include "advisor/output/format.hpp"
#include "advisor/output/scaling_svg.hpp"

namespace ff::advisor {

namespace {

struct ScalingOptions {
  SweepSpec spec;
  bool json = false, csv = false;
  std::string plot;
  double deadline_days = 0, max_gpu_hours = 0;
  bool deadline_given = false, hours_given = false;  // set from the options' counts
};

// What the range is made of, in words (every count's machine is the same).
std::string range_note(const std::vector<SweepCount>& counts) {
  for (const SweepCount& c : counts)
    if (c.point.found) return "range: the time with every kind of term at " + c.range_basis;
  return "";
}

// The first count with an answer: what the efficiency is against.
int base_index(const std::vector<SweepCount>& counts) {
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i].point.found) return int(i);
  return -1;
}

// A shape changes where it differs from the previous count's that had an answer.
std::vector<bool> shape_changes(const std::vector<SweepCount>& counts) {
  std::vector<bool> changed(counts.size(), false);
  std::string last;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!counts[i].point.found) continue;
    std::string s = grid_shape(counts[i].point.grid);
    changed[i] = !last.empty() && s != last;
    last = s;
  }
  return changed;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string number(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(10);
  os << v;
  return os.str();
}

struct Budget {
  int index = -1;
  double limit = 0;
};

nlohmann::json budget_json(const std::vector<SweepCount>& counts, const Budget& b) {
  if (b.index < 0) return {{"limit", b.limit}, {"gpus", nullptr}};
  const ScalingPoint& p = counts[b.index].point;
  return {{"limit", b.limit}, {"gpus", p.gpus}, {"days", days_to_train(p)}, {"gpu_hours", gpu_hours(p)}};
}

std::string budget_text(const std::vector<SweepCount>& counts, const Budget& deadline, const Budget& hours) {
  std::string out;
  auto pick = [&](const Budget& b) {
    const SweepCount& c = counts[b.index];
    return grouped(c.point.gpus) + " GPUs (" + config_label(c.config) + "): " + fixed(days_to_train(c.point), 1) +
           " days, " + si(gpu_hours(c.point), "") + " GPU-hours";
  };
  if (deadline.limit > 0)
    out += "Deadline " + fixed(deadline.limit, 1) + " days: " +
           (deadline.index < 0 ? std::string("no count trains in time")
                               : pick(deadline) + ", the fewest GPU-hours of the counts that meet it") +
           "\n";
  if (hours.limit > 0)
    out += "Budget " + si(hours.limit, "") + " GPU-hours: " +
           (hours.index < 0 ? std::string("no count trains within it")
                            : pick(hours) + ", the soonest of the counts within it") +
           "\n";
  return out;
}

void run(const ScalingOptions& o) {
  if (o.deadline_given && !(o.deadline_days > 0))
    input_error("--deadline-days " + fixed(o.deadline_days, 1) + ": expected a positive number of days");
  if (o.hours_given && !(o.max_gpu_hours > 0))
    input_error("--max-gpu-hours " + fixed(o.max_gpu_hours, 1) + ": expected a positive number of GPU-hours");
  if (o.spec.weak && o.spec.job.model.find(',') != std::string::npos && (o.deadline_given || o.hours_given))
    input_error(std::string(o.deadline_given ? "--deadline-days" : "--max-gpu-hours") +
                ": a budget compares counts that train one model; with --model a,b,… each count trains another");
  const SweepResult result = run_sweep(o.spec);
  const Sweep sweep = result.sweep;
  const std::vector<SweepCount>& counts = result.counts;
  const double wall = result.seconds;

  const int base = base_index(counts);
  if (base < 0) {
    std::string msg = "nothing fits or divides at any count:";
    for (const SweepCount& c : counts) msg += "\n" + grouped(c.point.gpus) + " GPUs: " + c.why;
    throw NoConfigError(msg);
  }
  std::vector<ScalingPoint> points;
  for (const SweepCount& c : counts) points.push_back(c.point);
  const std::vector<bool> changed = shape_changes(counts);
  const Budget deadline{o.deadline_given ? fewest_gpu_hours_within(points, o.deadline_days) : -1,
                        o.deadline_given ? o.deadline_days : 0};
  const Budget hours{o.hours_given ? soonest_within_gpu_hours(points, o.max_gpu_hours) : -1,
                     o.hours_given ? o.max_gpu_hours : 0};
  const std::string title = (sweep == Sweep::WeakModels ? o.spec.job.model : counts[0].job.model.name) + " on " +
                            counts[0].machine + ": " + sweep_name(sweep) + " scaling";

  if (!o.plot.empty()) {
    std::vector<ScalingPlotPoint> plot;
    for (const SweepCount& c : counts) {
      ScalingPlotPoint q;
      q.gpus = c.point.gpus;
      q.found = c.point.found;
      if (q.found) {
        const double tokens = c.point.tokens_per_s * c.point.time_s;
        q.tokens_per_s = c.point.tokens_per_s;
        q.tokens_per_s_low = tokens / c.point.time_high_s;
        q.tokens_per_s_high = tokens / c.point.time_low_s;
        q.mfu = c.point.mfu;
        q.label = c.config.grid.label();
        if (sweep == Sweep::WeakModels) q.model = c.job.model.name;
        q.parts = breakdown_parts(c.estimate.compute_s, c.estimate.exposed_comm_s, c.estimate.bubble_s,
                                  c.estimate.host_s);
      }
      plot.push_back(q);
    }
    const bool stated = counts[base].range_stated;
    write_file_atomic(o.plot, scaling_svg(plot, title,
                                          std::string("band: tokens/s over each point's range, from ") +
                                              (stated ? "the profile's stated errors" : "assumed errors") +
                                              " (MODEL.md §8)"));
  }

  if (o.json) {
    nlohmann::json out = {{"sweep", sweep_name(sweep)},
                          {"machine", counts[0].machine},
                          {"efficiency_base_gpus", counts[base].point.gpus},
                          {"range", range_note(counts)},
                          {"search_seconds", wall}};
    out["points"] = nlohmann::json::array();
    for (size_t i = 0; i < counts.size(); ++i) {
      const SweepCount& c = counts[i];
      const ScalingPoint& p = c.point;
      nlohmann::json j = {{"gpus", p.gpus}, {"model", c.job.model.name}, {"batch_sequences", c.job.batch},
                          {"found", p.found}};
      if (!p.found) {
        j["why"] = c.why;
      } else {
        j["time_s"] = p.time_s;
        j["time_low_s"] = p.time_low_s;
        j["time_high_s"] = p.time_high_s;
        j["tokens_per_s"] = p.tokens_per_s;
        j["mfu"] = p.mfu;
        j["efficiency"] = scaling_efficiency(points[base], p);
        j["days"] = days_to_train(p);
        j["gpu_hours"] = gpu_hours(p);
        j["shape"] = grid_shape(p.grid);
        j["shape_changed"] = bool(changed[i]);
        j["recommend"] = c.recommend;
      }
      out["points"].push_back(j);
    }
    if (deadline.limit > 0) out["deadline_days"] = budget_json(counts, deadline);
    if (hours.limit > 0) out["max_gpu_hours"] = budget_json(counts, hours);
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (o.csv) {
    std::cout << "gpus,model,batch_sequences,found,grid,pipeline,order,micro_batch,recompute,overlap,shape,"
                 "shape_changed,time_s,time_low_s,time_high_s,tokens_per_s,mfu,efficiency,days,gpu_hours\n";
    for (size_t i = 0; i < counts.size(); ++i) {
      const SweepCount& c = counts[i];
      const ScalingPoint& p = c.point;
      std::cout << p.gpus << "," << csv_field(c.job.model.name) << "," << c.job.batch << "," << (p.found ? 1 : 0);
      if (!p.found) {
        std::cout << std::string(16, ',') << "\n";
        continue;
      }
      std::cout << "," << csv_field(c.config.grid.str()) << "," << c.config.grid.p << "," << c.config.order.str() << ","
                << c.config.micro_batch << "," << recompute_name(c.config.recompute) << ","
                << csv_field(c.config.overlap.str()) << "," << grid_shape(p.grid) << "," << (changed[i] ? 1 : 0) << ","
                << number(p.time_s) << "," << number(p.time_low_s) << "," << number(p.time_high_s) << ","
                << number(p.tokens_per_s) << "," << number(p.mfu) << "," << number(scaling_efficiency(points[base], p))
                << "," << number(days_to_train(p)) << "," << number(gpu_hours(p)) << "\n";
    }
    return;
  }

  const Job& first = counts[0].job;
  std::cout << title << ", " << dtype_name(first.dtype) << ", " << fusion_name(first.fusion) << " kernels\n";
  if (sweep == Sweep::Strong)
    std::cout << "batch " << grouped(first.batch) << " × " << first.model.seq_len << " tokens at every count\n";
  else if (sweep == Sweep::WeakBatch)
    std::cout << "batch " << grouped(first.batch) << " sequences at " << grouped(first.gpus)
              << " GPUs, growing with the count\n";
  std::cout << grouped((long long)counts.size()) << " counts searched in " << seconds(wall) << "\n\n";
  bool staged = false;
  for (const SweepCount& c : counts) staged |= c.point.found && c.config.grid.p > 1;
  std::vector<std::string> head = {"GPUs"};
  if (sweep == Sweep::WeakModels) head.push_back("<model");
  if (sweep != Sweep::Strong) head.push_back("batch");
  head.push_back("<grid x,y,z,d");
  if (staged) head.push_back("P");
  for (const char* h : {"<shape", "mb", "time/it", "<range", "tokens/s", "MFU", "efficiency", "days", "GPU-hours"})
    head.push_back(h);
  Table t(head);
  for (size_t i = 0; i < counts.size(); ++i) {
    const SweepCount& c = counts[i];
    const ScalingPoint& p = c.point;
    std::vector<std::string> row = {grouped(p.gpus)};
    if (sweep == Sweep::WeakModels) row.push_back(c.job.model.name);
    if (sweep != Sweep::Strong) row.push_back(grouped(c.job.batch));
    if (!p.found) {
      row.push_back("nothing fits (below)");
      while (row.size() < head.size()) row.push_back("-");
      t.row(row);
      continue;
    }
    row.push_back(c.config.grid.str());
    if (staged) row.push_back(std::to_string(c.config.grid.p));
    for (std::string cell :
         {grid_shape(p.grid) + (changed[i] ? " ◆" : ""), std::to_string(c.config.micro_batch), seconds(p.time_s),
          seconds(p.time_low_s) + "–" + seconds(p.time_high_s), si(p.tokens_per_s, ""), fixed(100 * p.mfu, 1) + "%",
          fixed(100 * scaling_efficiency(points[base], p), 1) + "%", fixed(days_to_train(p), 1),
          si(gpu_hours(p), "")})
      row.push_back(std::move(cell));
    t.row(std::move(row));
  }
  std::cout << t.str();
  std::cout << "\nefficiency: model FLOP/s per GPU against " << grouped(counts[base].point.gpus) << " GPUs ("
            << (sweep == Sweep::Strong      ? "one batch: T0·N0 / (T·N)"
                : sweep == Sweep::WeakBatch ? "the batch grows with N: T0 / T"
                                            : "one model per count: MFU / MFU0")
            << "); ◆ the best configuration changes shape there (axes in use,\n"
               "the largest model-parallel one in capitals); days and GPU-hours to train "
            << (o.spec.tokens > 0 ? si(o.spec.tokens, "tokens") : std::string("20 tokens per parameter (--tokens N)")) << ".\n"
            << range_note(counts) << ".\n";
  for (const SweepCount& c : counts)
    if (!c.point.found)
      std::cout << "\n" << grouped(c.point.gpus) << " GPUs: " << c.why << "\n  (advisor recommend --gpus "
                << c.point.gpus << " --show-infeasible lists what was tried)\n";
  if (std::string b = budget_text(counts, deadline, hours); !b.empty()) std::cout << "\n" << b;
  if (!o.plot.empty()) std::cout << "\nWrote " << o.plot << "\n";
}

}  // namespace

void setup_scaling(CLI::App& app) {
  auto o = std::make_shared<ScalingOptions>();
  CLI::App* sub = app.add_subcommand(
      "scaling", "The best configuration at each GPU count of a sweep: time, tokens/s, MFU, efficiency, cost");
  add_job_options(sub, o->spec.job);
  sub->add_flag("--weak", o->spec.weak,
                "Weak scaling: the batch grows with the GPU count, or with a --model list, one model per count");
  auto* json = sub->add_flag("--json", o->json, "Print JSON: each count's recommend --top 1 answer and its scaling");
  sub->add_flag("--csv", o->csv, "Print CSV, one row per count")->excludes(json);
  sub->add_option("--plot", o->plot, "Write tokens/s, MFU and each term's share against GPUs as an SVG file");
  auto* tokens = sub->add_option("--tokens", o->spec.tokens, "Training tokens for days and GPU-hours [20 per parameter]");
  auto* deadline = sub->add_option("--deadline-days", o->deadline_days,
                  "Name the count that trains within this many days in the fewest GPU-hours");
  auto* hours = sub->add_option("--max-gpu-hours", o->max_gpu_hours,
                  "Name the count that trains soonest within this many GPU-hours");
  add_filter_options(*sub, o->spec.filters);
  sub->add_option("--threads", o->spec.threads, "Threads for each search; the answer does not depend on it [0: every core]")
      ->capture_default_str();
  sub->callback([o, deadline, hours, tokens] {
    if (tokens->count() && !(o->spec.tokens > 0))
      input_error("--tokens: expected a positive number of tokens");
    o->deadline_given = deadline->count() > 0;
    o->hours_given = hours->count() > 0;
    run(*o);
  });
}

}  // namespace ff::advisor
