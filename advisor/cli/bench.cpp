// advisor bench: how fast the search is (configurations per second per core,
// wall time of full searches), measured here, on one core.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "format.hpp"
#include "job_options.hpp"
#include "search.hpp"
#include "sensitivity.hpp"
#include "subcommands.hpp"

namespace ff::advisor {

namespace {

struct BenchOptions {
  int repeat = 5;
  bool json = false;
};

struct Case {
  const char* model;
  long long gpus;
  const char* machine;
};

void run(const BenchOptions& o) {
  if (o.repeat < 1) input_error("--repeat " + std::to_string(o.repeat) + ": expected at least 1");
  const Case cases[] = {{"gpt-80b", 1024, "perlmutter"},   {"gpt-60b", 6144, "alps"},
                        {"gpt-320b", 32768, "frontier"},   {"gpt-640b", 65536, "perlmutter"}};
  nlohmann::json out = nlohmann::json::array();
  Table t({"<model", "GPUs", "<machine", "evaluated", "feasible", "search (median)", "min", "+ how sure",
           "configs/s/core"});
  for (const Case& c : cases) {
    ModelSpec model = load_model(c.model);
    Job job{model, c.gpus, default_batch(model, c.gpus), Dtype::BF16};
    MachineProfile m = load_machine(c.machine);
    std::vector<double> wall, sure;
    SearchResult r;
    for (int i = 0; i < o.repeat; ++i) {
      std::cerr << "bench: " << c.model << " on " << c.gpus << " " << c.machine << ", run " << i + 1 << "/"
                << o.repeat << "\r" << std::flush;
      r = search(job, m, SearchOptions{});
      wall.push_back(r.seconds);
      auto t0 = std::chrono::steady_clock::now();
      assess(job, m, r);
      sure.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(wall.begin(), wall.end());
    std::sort(sure.begin(), sure.end());
    double median = wall[wall.size() / 2];
    double rate = r.evaluated / median;
    t.row({c.model, grouped(c.gpus), c.machine, grouped(r.evaluated), grouped(r.feasible), seconds(median),
           seconds(wall.front()), seconds(sure[sure.size() / 2]), si(rate, "")});
    out.push_back({{"model", c.model}, {"gpus", c.gpus}, {"machine", c.machine}, {"evaluated", r.evaluated},
                   {"feasible", r.feasible}, {"search_seconds_median", median}, {"search_seconds_min", wall.front()},
                   {"assess_seconds_median", sure[sure.size() / 2]}, {"configs_per_second_per_core", rate}});
  }
  std::cerr << std::string(60, ' ') << "\r";
  if (o.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << t.str()
            << "\nOne core (the search is single-threaded); the default batch; median of " << o.repeat
            << " runs. \"evaluated\" counts configurations\nafter the divisibility filter, each distinct placement "
               "once; memory-infeasible ones are pruned before pricing.\n";
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure the search's speed");
  sub->add_option("--repeat", o->repeat, "Runs per case (the median is reported)")->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] { run(*o); });
}

}  // namespace ff::advisor
