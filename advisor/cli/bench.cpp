// advisor bench: how fast the search is (configurations per second per core,
// wall time of full searches), measured here, on one thread and on
// --threads threads.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "advisor/cli/job_options.hpp"
#include "advisor/cli/scaling_sweep.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/error.hpp"
#include "advisor/model/search.hpp"
#include "advisor/model/sensitivity.hpp"
#include "advisor/output/format.hpp"

namespace ff::advisor {

namespace {

struct BenchOptions {
  int repeat = 5;
  int threads = 0;  // 0: every core
  bool json = false;
};

struct Case {
  const char* model;
  long long gpus;
  const char* machine;
};

// The median and fastest of `repeat` searches, and the median of assessing one.
struct Timing {
  SearchResult result;
  double median = 0, min = 0, assess = 0;
};

Timing time_search(const Job& job, const MachineProfile& m, const Case& c, int threads, int repeat) {
  SearchOptions so;
  so.threads = threads;
  std::vector<double> wall, sure;
  Timing t;
  for (int i = 0; i < repeat; ++i) {
    std::cerr << "bench: " << c.model << " on " << c.gpus << " " << c.machine << ", " << threads
              << (threads == 1 ? " thread" : " threads") << ", run " << i + 1 << "/" << repeat << "\r" << std::flush;
    t.result = search(job, m, so);
    wall.push_back(t.result.seconds);
    auto t0 = std::chrono::steady_clock::now();
    assess(job, m, t.result);
    sure.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(sure.begin(), sure.end());
  t.median = wall[wall.size() / 2];
  t.min = wall.front();
  t.assess = sure[sure.size() / 2];
  return t;
}

// The median and fastest of `repeat` scaling sweeps: every count's search,
// how sure and range, as `advisor scaling` runs them.
struct SweepTiming {
  double median = 0, min = 0;
  size_t counts = 0;
};

SweepTiming time_sweep(const SweepSpec& spec, int repeat) {
  std::vector<double> wall;
  SweepTiming t;
  for (int i = 0; i < repeat; ++i) {
    std::cerr << "bench: scaling " << spec.job.model << " over " << spec.job.gpus << " GPUs, " << spec.threads
              << (spec.threads == 1 ? " thread" : " threads") << ", run " << i + 1 << "/" << repeat << "\r" << std::flush;
    const SweepResult r = run_sweep(spec);
    wall.push_back(r.seconds);
    t.counts = r.counts.size();
  }
  std::sort(wall.begin(), wall.end());
  t.median = wall[wall.size() / 2];
  t.min = wall.front();
  return t;
}

void run(const BenchOptions& o) {
  if (o.repeat < 1) input_error("--repeat " + std::to_string(o.repeat) + ": expected at least 1");
  if (o.threads < 0) input_error("--threads " + std::to_string(o.threads) + ": expected 0 (every core) or more");
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  // One thread always, for the speed-up.
  std::vector<int> counts = {1};
  if (threads > 1) counts.push_back(threads);
  const Case cases[] = {{"gpt-80b", 1024, "perlmutter"},   {"gpt-60b", 6144, "alps"},
                        {"gpt-320b", 32768, "frontier"},   {"gpt-640b", 65536, "perlmutter"}};
  nlohmann::json out = nlohmann::json::array();
  Table t({"<model", "GPUs", "<machine", "evaluated", "feasible", "threads", "search (median)", "min", "speed-up",
           "+ how sure", "configs/s/core"});
  for (const Case& c : cases) {
    ModelSpec model = load_model(c.model);
    Job job{model, c.gpus, default_batch(model, c.gpus), Dtype::BF16};
    MachineProfile m = load_machine(c.machine);
    double one = 0;
    for (int n : counts) {
      Timing x = time_search(job, m, c, n, o.repeat);
      const SearchResult& r = x.result;
      if (n == 1) one = x.median;
      // Per core: the threads the search used (fewer than asked when it has fewer grids).
      double rate = r.evaluated / x.median / r.threads;
      double speedup = one / x.median;
      t.row({c.model, grouped(c.gpus), c.machine, grouped(r.evaluated), grouped(r.feasible), std::to_string(r.threads),
             seconds(x.median), seconds(x.min), fixed(speedup, 2) + "×", seconds(x.assess), si(rate, "")});
      out.push_back({{"model", c.model}, {"gpus", c.gpus}, {"machine", c.machine}, {"evaluated", r.evaluated},
                     {"feasible", r.feasible}, {"threads", r.threads}, {"search_seconds_median", x.median},
                     {"search_seconds_min", x.min}, {"speedup", speedup}, {"assess_seconds_median", x.assess},
                     {"configs_per_second_per_core", rate}});
    }
  }
  // The scaling sweep the README shows, twelve counts up to 65,536 GPUs.
  Table sweeps({"<sweep", "counts", "threads", "wall (median)", "min", "speed-up"});
  SweepSpec spec;
  spec.job.model = "gpt-80b";
  spec.job.machine = "perlmutter";
  spec.job.gpus = "32..65536";
  spec.progress = false;
  double one = 0;
  for (int n : counts) {
    spec.threads = n;
    const SweepTiming x = time_sweep(spec, o.repeat);
    if (n == 1) one = x.median;
    const std::string name = "scaling gpt-80b perlmutter --gpus " + spec.job.gpus;
    sweeps.row({name, std::to_string(x.counts), std::to_string(n), seconds(x.median), seconds(x.min),
                fixed(one / x.median, 2) + "×"});
    out.push_back({{"sweep", name}, {"counts", x.counts}, {"threads", n}, {"sweep_seconds_median", x.median},
                   {"sweep_seconds_min", x.min}, {"speedup", one / x.median}});
  }
  std::cerr << std::string(90, ' ') << "\r";
  if (o.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << t.str() << "\nThe default batch; median of " << o.repeat
            << " runs; speed-up against one thread; configs/s/core = evaluated / wall / threads.\n"
               "\"evaluated\" counts configurations after the divisibility filter, each distinct placement once;\n"
               "memory-infeasible ones are pruned before pricing. \"+ how sure\" (the ±20% ranks) runs on one thread.\n\n"
            << sweeps.str()
            << "\nEach count's search, how sure and range, as advisor scaling runs them (the largest count's "
               "default batch).\n";
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure the search's speed");
  sub->add_option("--repeat", o->repeat, "Runs per case (the median is reported)")->capture_default_str();
  sub->add_option("--threads", o->threads, "Threads for the second run of each case (the first has one) [0: every core]")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] { run(*o); });
}

}  // namespace ff::advisor
