// advisor recommend: search every configuration, rank them, say how sure.
#include <cmath>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "advisor/cli/filter_options.hpp"
#include "advisor/cli/job_options.hpp"
#include "advisor/cli/recommend_report.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/atomic_file.hpp"
#include "advisor/core/error.hpp"
#include "advisor/model/search.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/format.hpp"
#include "advisor/output/launch.hpp"
#include "advisor/output/report_svg.hpp"

namespace ff::advisor {

namespace {

// The table's rc column: y (full), sel (the attention core), n.
const char* recompute_cell(Recompute r) {
  return r == Recompute::Full ? "y" : r == Recompute::Selective ? "sel" : "n";
}

struct RecommendOptions {
  JobOptions job;
  int top = 10;
  bool json = false;
  std::string plot;
  double tokens = 0;  // 0: 20 tokens per parameter
  bool show_infeasible = false;
  FilterFlags filters;
  int threads = 0;  // 0: every core
};

void print_rejected(const SearchResult& r, size_t limit) {
  std::cout << "\nRejected (" << grouped((long long)r.rejected.size()) << "):\n";
  Table t({"<grid", "mb", "rc", "<why"});
  for (size_t i = 0; i < r.rejected.size() && i < limit; ++i) {
    const Rejected& x = r.rejected[i];
    t.row({x.grid.label(), x.micro_batch ? std::to_string(x.micro_batch) : "-",
           x.micro_batch ? recompute_cell(x.recompute) : "-", x.reason});
  }
  std::cout << t.str("  ");
  if (r.rejected.size() > limit) std::cout << "  … " << grouped(long(r.rejected.size() - limit)) << " more (--json lists all)\n";
  for (const auto& s : r.split_reasons) std::cout << "  not divisible: " << s << "\n";
}

// "-" for an axis of size 1 (nothing to expose), else the seconds.
std::string exposed(const Config& c, Axis a, const Estimate& e) {
  return c.grid.size(a) == 1 ? "-" : seconds(e.exposed_comm_s[int(a)]);
}

// "holds", or the ranks it moves between under the perturbations.
std::string rank_range(const Confidence& c, int rank) {
  if (c.stable) return "holds";
  int lo = rank, hi = rank;
  for (int r : c.rank_under) lo = std::min(lo, r), hi = std::max(hi, r);
  return "#" + std::to_string(lo) + "–#" + std::to_string(hi);
}


void run(const RecommendOptions& o) {
  LoadedJob l = load_job(o.job);
  const Job& job = l.job;
  const MachineProfile& m = l.machine;
  if (o.top < 1) input_error("--top " + std::to_string(o.top) + ": expected at least 1");
  SearchOptions so = search_filters(o.filters, job, m);
  so.top = o.top;
  so.keep_rejected = o.show_infeasible;
  if (o.threads < 0) input_error("--threads " + std::to_string(o.threads) + ": expected 0 (every core) or more");
  so.threads = o.threads;

  SearchResult r = search(job, m, so);
  if (o.show_infeasible && !o.json) print_rejected(r, 40);
  if (r.top.empty()) {
    NoAnswer why = no_answer(job, m, r, o.show_infeasible);
    if (!why.divisible) input_error(why.message);
    throw NoConfigError(why.message);
  }
  std::vector<Confidence> conf = assess(job, m, r);
  const double params = parameter_count(job.model);
  const double tokens = train_tokens(job, o.tokens);

  std::vector<BreakdownBar> bars;
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Ranked& x = r.top[i];
    bars.push_back({"#" + std::to_string(i + 1) + "  " + config_label(x.config), x.estimate.compute_s,
                    x.estimate.exposed_comm_s, x.memory.total() / 1073741824.0, x.estimate.bubble_s, x.estimate.host_s});
  }
  if (!o.plot.empty()) {
    write_file_atomic(o.plot, breakdown_svg(bars, job.model.name + " on " + grouped(job.gpus) + " × " + m.name +
                                                      " GPUs: predicted time per iteration"));
  }

  std::vector<PredictedRange> ranges;
  for (const Ranked& x : r.top) ranges.push_back(predicted_range(job, m, x.config));
  if (o.json) {
    std::cout << recommend_json(job, o.job, m, r, conf, ranges, tokens, o.show_infeasible).dump(2) << "\n";
    return;
  }

  std::cout << job.model.name << " (" << fixed(params / 1e9, 1) << " B parameters) on " << grouped(job.gpus) << " × " << m.name
            << " GPUs (" << m.gpus_per_node << " per node), batch " << grouped(job.batch) << " × "
            << job.model.seq_len << " tokens, " << dtype_name(job.dtype) << ", " << fusion_name(job.fusion) << " kernels"
            << collectives_words(m) << "\n"
            << "evaluated " << grouped(r.evaluated) << " configurations, " << grouped(r.feasible) << " fit in "
            << gib(m.hbm_capacity) << " GiB, searched in " << seconds(r.seconds) << " on "
            << r.threads << (r.threads == 1 ? " thread" : " threads") << "\n\n";
  // The pipe and idle columns appear when some pick has stages.
  bool staged = false, offloaded = false, moved = false, split = false, interleaved = false;
  for (const Ranked& x : r.top) {
    staged |= x.config.grid.p > 1, offloaded |= x.config.offload, moved |= x.config.offload || x.config.shard_optimizer;
    split |= x.config.sequence_parallel, interleaved |= x.config.virtual_stages > 1;
  }
  auto shown = [&](Axis a) { return a != Axis::P || staged; };
  std::vector<std::string> head = {"#", "<grid x,y,z,d"};
  if (staged) head.push_back("P");
  if (interleaved) head.push_back("v");
  for (const char* h : {"<order", "mb", "<rc", "<overlap"}) head.push_back(h);
  if (split) head.push_back("sp");
  if (moved) head.push_back("<opt");
  for (const char* h : {"time/it", "<range", "compute"}) head.push_back(h);
  for (Axis a : kAxes)
    if (shown(a)) head.push_back(std::string("exp ") + axis_name(a));
  if (staged) head.push_back("idle");
  if (offloaded) head.push_back("host");
  for (const char* h : {"GiB", "MFU", "tokens/s", "days", "margin", "<±20%"}) head.push_back(h);
  Table t(head);
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Ranked& x = r.top[i];
    const auto& e = x.estimate;
    std::string order = x.config.order.str();
    if (x.equivalent_orders) order += " +" + std::to_string(x.equivalent_orders);
    std::vector<std::string> row = {std::to_string(i + 1), x.config.grid.str()};
    if (staged) row.push_back(std::to_string(x.config.grid.p));
    if (interleaved) row.push_back(std::to_string(x.config.virtual_stages));
    for (std::string cell : {order, std::to_string(x.config.micro_batch), std::string(recompute_cell(x.config.recompute)),
                             x.config.overlap.str()})
      row.push_back(std::move(cell));
    if (split) row.push_back(x.config.sequence_parallel ? "y" : "n");
    if (moved) row.push_back(x.config.offload ? "host" : x.config.shard_optimizer ? "shard" : "gpu");
    row.push_back(seconds(e.time_s));
    row.push_back(seconds(ranges[i].low) + "–" + seconds(ranges[i].high));
    row.push_back(seconds(e.compute_s));
    for (Axis a : kAxes)
      if (shown(a)) row.push_back(exposed(x.config, a, e));
    if (staged) row.push_back(x.config.grid.p == 1 ? "-" : seconds(e.bubble_s));
    if (offloaded) row.push_back(x.config.offload ? seconds(e.host_s) : "-");
    for (std::string cell : {gib(x.memory.total()), fixed(100 * e.mfu, 1) + "%", si(e.tokens_per_s, ""),
                             fixed(tokens / e.tokens_per_s / 86400, 1),
                             i + 1 < r.candidates.size() ? fixed(100 * conf[i].margin, 2) + "%" : "-",
                             rank_range(conf[i], int(i) + 1)})
      row.push_back(std::move(cell));
    t.row(std::move(row));
  }
  std::cout << t.str();
  // Picks whose ranges reach #1's: the model cannot tell them apart.
  size_t overlapping = 1;
  while (overlapping < ranges.size() && ranges[overlapping].low <= ranges[0].high) ++overlapping;
  std::cout << "\ntime/it = compute + exposed communication per axis (what overlap did not hide)"
            << (staged ? " + pipeline idle (P stages: the slowest stage's compute and communication, its stage messages "
                         "on the pipe axis, idle in fill and drain)"
                       : "")
            << (offloaded ? " + host link (what the data-parallel all-reduce did not hide of the offload)" : "")
            << (interleaved ? "; v: model chunks per stage (interleaved 1F1B)" : "")
            << (split ? "; sp: sequence parallelism over Y" : "")
            << (moved ? "; opt: the optimizer state on the GPU, sharded over data (ZeRO-1) or offloaded to the host" : "")
            << "; days to train "
            << si(tokens, "tokens") << (o.tokens > 0 ? "" : " (20 per parameter; --tokens N)") << ".\n"
            << "order +N: N other placement orders cost exactly the same. margin: how much faster than the next; ±20%: whether the rank holds when intra-node bandwidth,\n"
            << "inter-node bandwidth or GEMM efficiency is 20% lower or higher, else the ranks it moves between\n"
            << "(--json names each case). range: the time with every kind of term at "
            << range_basis(m) << ".\n";
  if (overlapping > 1)
    std::cout << "#1–#" << overlapping << " differ by less than their ranges: the model cannot tell them apart; "
              << "calibrate the machine (measure, advisor calibrate) or run them (advisor validate).\n";
  std::cout << "\nLaunch #1:\n";
  std::cout << launch_text(launch_lines(job, o.job.model, m, r.top[0].config, std::max(0, o.job.seq_len)));
  if (!o.plot.empty()) std::cout << "\nWrote " << o.plot << "\n";
}

}  // namespace

void setup_recommend(CLI::App& app) {
  auto o = std::make_shared<RecommendOptions>();
  CLI::App* sub = app.add_subcommand("recommend", "Rank every configuration (4D grid and pipeline stages) of a job on a machine");
  add_job_options(sub, o->job);
  sub->add_option("--top", o->top, "How many configurations to show")->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON (MODEL.md §3) instead of a table");
  sub->add_option("--plot", o->plot, "Write the top configurations' time breakdown as an SVG file");
  auto* tokens = sub->add_option("--tokens", o->tokens, "Training tokens for the days column [20 per parameter]");
  sub->add_flag("--show-infeasible", o->show_infeasible, "Also list what did not fit or divide, and why");
  add_filter_options(*sub, o->filters);
  sub->add_option("--threads", o->threads, "Threads for the search; the answer does not depend on it [0: every core]")
      ->capture_default_str();
  sub->callback([o, tokens] {
    if (tokens->count() && !(o->tokens > 0))
      input_error("--tokens: expected a positive number of tokens");
    run(*o);
  });
}

}  // namespace ff::advisor
