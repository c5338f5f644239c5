#include "advisor/cli/scaling_sweep.hpp"

#include <chrono>
#include <iostream>

#include "advisor/cli/recommend_report.hpp"
#include "advisor/core/error.hpp"
#include "advisor/output/format.hpp"

namespace ff::advisor {

namespace {

std::vector<std::string> split_models(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (out.back().empty()) input_error("--model " + s + ": an empty name in the list");
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// Each count's job options: the count, its model, and the batch as the sweep moves it.
std::vector<JobOptions> count_options(const JobOptions& o, const std::vector<long long>& counts, Sweep sweep) {
  const std::vector<std::string> models = split_models(o.model);
  if (sweep != Sweep::WeakModels && models.size() > 1)
    input_error("--model " + o.model + ": one model per GPU count is weak scaling; add --weak");
  if (sweep == Sweep::WeakModels && models.size() != counts.size())
    input_error("--model " + o.model + ": " + std::to_string(models.size()) + " models for " +
                std::to_string(counts.size()) + " GPU counts; give one per count");
  JobOptions first = o;
  first.gpus = std::to_string(counts.front());
  first.model = models.front();
  const Job base = load_job(first).job;
  const bool batch_given = o.batch > 0 || o.batch_tokens != -1;
  std::vector<JobOptions> out;
  for (size_t i = 0; i < counts.size(); ++i) {
    JobOptions c = o;
    c.gpus = std::to_string(counts[i]);
    c.model = models[sweep == Sweep::WeakModels ? i : 0];
    if (sweep == Sweep::Strong) {
      // One batch at every count: the given one, else the largest count's default.
      c.batch = batch_given ? base.batch : default_batch(base.model, counts.back());
      c.batch_tokens = -1;
    } else if (sweep == Sweep::WeakBatch) {
      if ((base.batch * counts[i]) % counts.front())
        input_error("--weak: batch " + grouped(base.batch) + " × " + grouped(counts[i]) + "/" + grouped(counts.front()) +
                    " GPUs is not a whole number of sequences; give --batch a multiple of " + grouped(counts.front()));
      c.batch = base.batch * counts[i] / counts.front();
      c.batch_tokens = -1;
    }
    out.push_back(c);
  }
  return out;
}

SweepCount run_count(const SweepSpec& spec, const JobOptions& jo) {
  LoadedJob l = load_job(jo);
  SweepCount c;
  c.job = l.job;
  c.machine = l.machine.name;
  SearchOptions so = search_filters(spec.filters, l.job, l.machine);
  so.top = 1;
  so.threads = spec.threads;
  SearchResult r = search(l.job, l.machine, so);
  ScalingPoint& p = c.point;
  p.gpus = l.job.gpus;
  p.train_tokens = train_tokens(l.job, spec.tokens);
  p.model_flops = model_flops(l.job.model, double(l.job.batch));
  if (r.top.empty()) {
    c.why = no_answer(l.job, l.machine, r, true).message;
    return c;
  }
  c.config = r.top[0].config;
  const PredictedRange range = predicted_range(l.job, l.machine, c.config);
  c.recommend = recommend_json(l.job, jo, l.machine, r, assess(l.job, l.machine, r), {range}, p.train_tokens, false);
  c.estimate = r.top[0].estimate;
  p.found = true;
  p.time_s = c.estimate.time_s;
  p.tokens_per_s = c.estimate.tokens_per_s;
  p.mfu = c.estimate.mfu;
  p.grid = c.config.grid;
  p.time_low_s = range.low, p.time_high_s = range.high;
  c.range_basis = range_basis(l.machine);
  c.range_stated = range.stated;
  return c;
}

}  // namespace

const char* sweep_name(Sweep s) {
  return s == Sweep::Strong ? "strong" : s == Sweep::WeakBatch ? "weak" : "weak-models";
}

SweepResult run_sweep(const SweepSpec& spec) {
  const std::vector<long long> gpus = parse_gpu_counts(spec.job.gpus);
  if (spec.threads < 0) input_error("--threads " + std::to_string(spec.threads) + ": expected 0 (every core) or more");
  SweepResult out;
  out.sweep = !spec.weak                                      ? Sweep::Strong
              : spec.job.model.find(',') == std::string::npos ? Sweep::WeakBatch
                                                              : Sweep::WeakModels;
  const std::vector<JobOptions> per_count = count_options(spec.job, gpus, out.sweep);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < per_count.size(); ++i) {
    if (spec.progress)
      std::cerr << "scaling: " << grouped(gpus[i]) << " GPUs (" << i + 1 << "/" << per_count.size() << ")      \r"
                << std::flush;
    out.counts.push_back(run_count(spec, per_count[i]));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (spec.progress) std::cerr << std::string(48, ' ') << "\r" << std::flush;
  return out;
}

}  // namespace ff::advisor
