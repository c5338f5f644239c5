#include "advisor/model/search.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <queue>
#include <thread>
#include <tuple>

#include "advisor/core/error.hpp"

namespace ff {

namespace {

enum : uint8_t { kOtp = 1, kOar = 2, kOrs = 4, kOag = 8, kOffload = 16, kOdp = 32, kShard = 64, kSp = 128 };
constexpr size_t kOverlapSets = 64;  // overlap flag sets are below kOdp·2

Overlap overlap_of(uint8_t flags) {
  return Overlap{bool(flags & kOar), bool(flags & kOrs), bool(flags & kOag), bool(flags & kOdp), bool(flags & kOtp)};
}

uint8_t flags_of(const Overlap& o) {
  return uint8_t((o.oar ? kOar : 0) | (o.ors ? kOrs : 0) | (o.oag ? kOag : 0) | (o.odp ? kOdp : 0) |
                 (o.otp ? kOtp : 0));
}

// Overlap flags that change something on this grid: OAR needs an X or Y
// axis, ORS and OAG a Z axis, ODP a data axis. A flag with nothing to hide is
// not a new configuration. OTP is not among them: it goes with sequence
// parallelism (flags_with_sp).
std::vector<uint8_t> overlap_choices(const Grid& g, const SearchOptions& opt) {
  if (opt.fixed_overlap) return {uint8_t(flags_of(opt.overlap) & ~kOtp)};
  std::vector<uint8_t> out;
  for (uint8_t odp : {uint8_t(0), uint8_t(kOdp)})
    for (uint8_t f = 0; f < 16; f += 2) {
      if ((f & kOar) && g.x == 1 && g.y == 1) continue;
      if ((f & (kOrs | kOag)) && g.z == 1) continue;
      if (odp && g.d == 1) continue;
      out.push_back(uint8_t(f | odp));
    }
  return out;
}

std::vector<int> micro_batch_choices(const Job& job, const Grid& g, const SearchOptions& opt) {
  long long per_rank = job.batch / (1LL * g.z * g.d);
  std::vector<int> out;
  if (!opt.micro_batches.empty()) {
    for (int mb : opt.micro_batches)
      if (mb >= 1 && per_rank % mb == 0) out.push_back(mb);
    std::sort(out.begin(), out.end());
    return out;
  }
  for (int mb = 1; mb <= opt.max_micro_batch && mb <= per_rank; ++mb)
    if (per_rank % mb == 0) out.push_back(mb);
  return out;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

std::string reason_kind(const std::string& why) { return why.substr(0, why.find('=')); }

}  // namespace

std::vector<bool> sequence_parallel_choices(const Job& job, const Grid& g, int mb, const SearchOptions& opt) {
  std::vector<bool> sps;
  if (opt.sequence_parallel_on && sequence_parallel_problem(job.model, g, mb).empty()) sps.push_back(true);
  if (opt.sequence_parallel_off || sps.empty()) sps.push_back(false);
  return sps;
}

std::vector<int> virtual_stage_choices(const Job& job, const Grid& g, int mb, const SearchOptions& opt) {
  std::vector<int> vs;
  for (int v : opt.virtual_stages)
    if (v == 1 || virtual_stages_problem(job, g, mb, v).empty()) vs.push_back(v);
  if (vs.empty()) vs.push_back(1);
  return vs;
}

std::vector<int> pipeline_choices(const Job& job, const SearchOptions& opt) {
  // Divisors of G (at most 2^24, found up to its square root) that divide L,
  // as Megatron's default; any up to L (a stage holds at least one block;
  // MODEL.md §9 partitions the blocks) where --pipeline names it, or the
  // stage count a pinned partition says.
  std::vector<long long> divs;
  for (long long i = 1; i * i <= job.gpus; ++i)
    if (job.gpus % i == 0) {
      divs.push_back(i);
      if (i != job.gpus / i) divs.push_back(job.gpus / i);
    }
  std::sort(divs.begin(), divs.end());
  std::vector<int> out;
  for (long long P : divs) {
    if (P > job.model.layers) continue;
    const bool pinned = !job.stage_layers.empty(), named = !opt.pipelines.empty();
    if (pinned && P != (long long)job.stage_layers.size()) continue;
    if (!pinned && !named && job.model.layers % P) continue;
    if (opt.pipelines.empty() || std::find(opt.pipelines.begin(), opt.pipelines.end(), P) != opt.pipelines.end())
      out.push_back(int(P));
  }
  return out;
}

Config candidate_config(const Candidate& c, const std::vector<Grid>& grids, Dtype dt) {
  Config cfg;
  cfg.grid = grids[c.grid];
  cfg.order = distinct_orders(cfg.grid)[c.order];
  cfg.micro_batch = c.micro_batch;
  cfg.recompute = Recompute(c.recompute);
  cfg.virtual_stages = int(c.virtual_stages);
  cfg.overlap = overlap_of(c.flags);
  cfg.dtype = dt;
  cfg.offload = c.flags & kOffload;
  cfg.shard_optimizer = c.flags & kShard;
  cfg.sequence_parallel = c.flags & kSp;
  return cfg;
}

namespace {

// What the search space looks like whatever the grid.
struct Choices {
  std::vector<Recompute> recompute;                 // the smaller footprint first
  std::vector<bool> offload, shard;
  // OTP with every sequence-parallel plan: Transformer Engine's (fused
  // kernels), unless --overlap names the flags without it. It only hides.
  bool tp_overlap = false;
  double capacity = 0, host_capacity = 0, batch_tokens = 0;
};

// A grid's share of the result. Threads fill these by grid, the merge reads
// them in grid order: the result does not depend on which thread priced what.
struct GridShare {
  uint32_t grid_index = 0;  // into SearchResult::grids, when divisible
  std::vector<int> micro_batches;  // empty: not divisible
  std::vector<Candidate> candidates;
  std::vector<Rejected> rejected;
  long long evaluated = 0, feasible = 0;
  double smallest_footprint = 1e300;
  Config smallest_config;
};

// The least top-th time any thread has seen: a bound for all of them.
struct SharedBound {
  std::atomic<double> s{std::numeric_limits<double>::infinity()};
  void lower(double t) {
    for (double now = s.load(std::memory_order_relaxed); t < now && !s.compare_exchange_weak(now, t);) {
    }
  }
};

// What a thread reuses from grid to grid.
struct Scratch {
  LinkCache cache;
  StagedPlan plan;
  StagedTimes times;
  std::array<std::array<Estimate, kMaxStageKinds>, kOverlapSets> kinds;  // per overlap flag set
  // The `top` fastest times this thread has priced (a max-heap): the top-th
  // of all candidates is at most its largest.
  std::priority_queue<double> fastest;
  // Per placement order of the grid: its links and its stage pairs' link.
  std::vector<PerAxis<AxisLink>> links;
  std::vector<const PairLink*> pairs;
  SharedBound* bound;
};

// Whether no configuration of this plan can be kept by the ranking: it keeps
// those within 1.5× of the top-th's time, and no configuration is faster
// than any of its stages' compute (each stage runs it, M micro-batches and a
// step, and waits or communicates on top; MODEL.md §9). The slack covers
// rounding in the schedule's sums.
bool hopeless(double least_s, const Scratch& s) {
  return least_s * (1 - 1e-6) > 1.5 * s.bound->s.load(std::memory_order_relaxed);
}

// The least compute a stage of this plan runs: all of it, but a sharded
// optimizer's step on 1/G_d of the state.
double least_compute(const Plan& pl) { return pl.compute_s - pl.compute_step_s * (1 - 1.0 / pl.grid.d); }

// With stages, the flush schedule's T = Σ s_i/v + 2(P−1)·t + (M − 1/v)·u
// (u ≥ max s_i) bounds the iteration, and each stage's s_i is at least its
// compute per micro-batch: the fill and drain on top of the slowest stage.
double least_pipelined(const StagedPlan& plan) {
  if (plan.kinds.stages == 1) return 0;
  double sum = 0, most = 0;
  for (int k = 0; k < plan.kinds.count; ++k) {
    const double s = plan.plan[k].compute_fwd_s + plan.plan[k].compute_bwd_s;
    sum += plan.kinds.copies[k] * s;
    most = std::max(most, s);
  }
  const double v = plan.virtual_stages;
  return sum / v + (double(plan.plan[0].micro_steps) - 1.0 / v) * most;
}

// The least time of any configuration of this plan: its slowest stage's compute.
double least_time(const StagedPlan& plan) {
  double least = least_pipelined(plan);
  for (int k = 0; k < plan.kinds.count; ++k) least = std::max(least, least_compute(plan.plan[k]));
  return least;
}

// With a placement's links: the compute plus the communication no flag can
// hide or replace (each stage's f, b and step hold theirs), sequence
// parallelism's Y collectives among it where OTP cannot apply. The data
// axis' reductions are left out: odp and sharding price them otherwise.
double least_time(const StagedPlan& plan, const StagedTimes& times, bool otp) {
  double least = least_pipelined(plan);
  for (int k = 0; k < plan.kinds.count; ++k) {
    const Plan& pl = plan.plan[k];
    double t = least_compute(pl);
    for (size_t i = 0; i < pl.comm.size(); ++i) {
      const Hide h = pl.comm[i].hide;
      if ((h == Hide::None || (!otp && (h == Hide::TpForward || h == Hide::TpBackward))) && pl.comm[i].axis != Axis::D)
        t += per_iteration(pl, pl.comm[i]) * times.times[k][i];
    }
    least = std::max(least, t);
  }
  return least;
}

void note_time(Scratch& s, double t, size_t top) {
  if (s.fastest.size() < top) s.fastest.push(t);
  else if (t < s.fastest.top()) {
    s.fastest.pop();
    s.fastest.push(t);
  } else return;
  if (s.fastest.size() == top) s.bound->lower(s.fastest.top());
}

void price_grid(const Job& job, const MachineProfile& p, const SearchOptions& opt, const Choices& ch, const Grid& g,
                Scratch& s, GridShare& out) {
  std::vector<Order> all_orders = distinct_orders(g);
  std::vector<uint8_t> order_ids;
  const Order wanted = opt.fixed_order ? canonical_order(g, opt.order) : Order{};
  for (size_t i = 0; i < all_orders.size(); ++i)
    if (!opt.fixed_order || all_orders[i] == wanted) order_ids.push_back(uint8_t(i));
  const std::vector<uint8_t> flag_choices = overlap_choices(g, opt);
  // With sequence parallelism under OTP (where the placement keeps Y's
  // groups inside a node: Transformer Engine's userbuffers), every flag set
  // carries it, and OAR has nothing left to hide where G_x = 1 (OTP hides
  // Y's reduce-scatters as OAR would): the sets without it stand for those with it.
  auto with_otp = [&](const std::vector<uint8_t>& flags) {
    std::vector<uint8_t> out;
    for (uint8_t f : flags)
      if (g.x > 1 || !(f & kOar) || opt.fixed_overlap) out.push_back(uint8_t(f | kOtp));
    return out;
  };
  const std::vector<uint8_t> flags_tp = with_otp(flag_choices);
  const std::vector<Stage> stages = stages_of(job, g);  // for every memory check of this grid
  const size_t top = size_t(std::max(opt.top, 1));
  // The links depend on the placement alone: once per grid, not per plan.
  s.links.resize(order_ids.size());
  s.pairs.resize(order_ids.size());
  for (size_t i = 0; i < order_ids.size(); ++i) {
    const Order& o = all_orders[order_ids[i]];
    s.links[i] = placement_links(p, g, o, &s.cache);
    s.pairs[i] = &s.cache.pair(axis_stride(g, o, Axis::P), g.p);
  }
  std::vector<bool> tp_ok(order_ids.size());
  size_t tp_orders = 0;
  for (size_t i = 0; i < order_ids.size(); ++i)
    tp_orders += tp_ok[i] = ch.tp_overlap && g.y > 1 && !s.links[i][static_cast<int>(Axis::Y)].across;
  // Where the optimizer state may live on this grid: offload and sharding
  // each where the search allows them (sharding needs a data axis), not both.
  std::vector<OptimizerState> states;
  for (bool off : ch.offload)
    for (bool shard : ch.shard)
      if (!(off && shard) && (!shard || g.d > 1)) states.push_back({off, shard});
  auto sp_choices = [&](int mb) { return sequence_parallel_choices(job, g, mb, opt); };
  auto v_choices = [&](int mb) { return virtual_stage_choices(job, g, mb, opt); };
  // Flag sets over the placements: with OTP where it applies, else as they are.
  auto placed_sets = [&](bool sp, size_t plain, size_t tp) {
    return sp ? (order_ids.size() - tp_orders) * plain + tp_orders * tp : order_ids.size() * plain;
  };
  out.evaluated = 0;
  for (int mb : out.micro_batches)
    for (bool sp : sp_choices(mb))
      out.evaluated += (long long)(ch.recompute.size() * v_choices(mb).size() * states.size() *
                                   placed_sets(sp, flag_choices.size(), flags_tp.size()));

  for (int mb : out.micro_batches) {
    const std::vector<bool> sps = sp_choices(mb);
    const std::vector<int> vs = v_choices(mb);
    // Memory grows with the micro-batch: once the smallest footprint of
    // this micro-batch does not fit, no larger one will.
    // The smallest footprint: offload if tried, else sharding if tried.
    OptimizerState small{};
    for (const OptimizerState& os : states)
      if (os.offload || (os.sharded && !small.offload)) small = os;
    MemoryUse least = memory_use(job, p, g, mb, ch.recompute.front(), Overlap{}, small, sps.front(), &stages, vs.front());
    if (least.total() < out.smallest_footprint) {
      out.smallest_footprint = least.total();
      out.smallest_config = Config{g, all_orders[0], mb, ch.recompute.front(), Overlap{}, job.dtype, small.offload,
                                   small.sharded, sps.front(), vs.front()};
    }
    bool any_fit = false;
    for (size_t choice = 0; choice < ch.recompute.size() * sps.size() * vs.size(); ++choice) {
      const Recompute rc = ch.recompute[choice / (sps.size() * vs.size())];
      const bool sp = sps[(choice / vs.size()) % sps.size()];
      const int v = vs[choice % vs.size()];
      // OAG and ORS hold more buffers, offload and sharding fewer: per
      // optimizer state, the flag sets that fit (GPU and host memory); OTP
      // and OAR hold none.
      std::vector<std::vector<uint8_t>> fitting(states.size()), fitting_tp(states.size());
      size_t fit_sets = 0, fit_sets_tp = 0;
      for (size_t si = 0; si < states.size(); ++si) {
        const OptimizerState os = states[si];
        MemoryUse base = memory_use(job, p, g, mb, rc, Overlap{}, os, sp, &stages, v);
        if (base.total() > ch.capacity || (os.offload && base.host > ch.host_capacity)) {
          if (opt.keep_rejected)
            out.rejected.push_back({g, mb, rc,
                                    base.total() > ch.capacity
                                        ? "needs " + gib(base.total()) + " of " + gib(ch.capacity) + " (states " +
                                              gib(base.states) + ", activations " + gib(base.activations) + ")" +
                                              (os.offload ? " with offload" : os.sharded ? " with a sharded optimizer" : "")
                                        : "offload needs " + gib(base.host) + " of host memory per GPU, " +
                                              gib(ch.host_capacity) + " there"});
          continue;
        }
        for (uint8_t f : flag_choices)
          if (memory_use(job, p, g, mb, rc, overlap_of(f), os, sp, &stages, v).total() <= ch.capacity) fitting[si].push_back(f);
        if (sp && tp_orders) fitting_tp[si] = with_otp(fitting[si]);  // read only there
        fit_sets += fitting[si].size();
        fit_sets_tp += fitting_tp[si].size();
      }
      if (fit_sets == 0) continue;
      any_fit = true;
      make_staged_plan(job, p, g, mb, rc, s.plan, sp, v);
      out.feasible += (long long)placed_sets(sp, fit_sets, fit_sets_tp);
      // Counted, not priced: the ranking would drop every one of them.
      if (opt.prune && hopeless(least_time(s.plan), s)) continue;
      for (size_t i = 0; i < order_ids.size(); ++i) {
        const uint8_t oi = order_ids[i];
        staged_term_times(s.plan, s.links[i], *s.pairs[i], s.times);
        const bool tp = sp && tp_ok[i];
        if (opt.prune && hopeless(least_time(s.plan, s.times, tp), s)) continue;
        const std::vector<uint8_t>& flags = tp ? flags_tp : flag_choices;
        const std::vector<std::vector<uint8_t>>& fit = tp ? fitting_tp : fitting;
        // The flags' combine() once for every optimizer state (most of the cost).
        for (uint8_t f : flags)
          for (const auto& fits : fit)
            if (std::find(fits.begin(), fits.end(), f) != fits.end()) {
              combine_kinds(s.plan, s.times, overlap_of(f), ch.batch_tokens, s.kinds[f]);
              break;
            }
        for (size_t si = 0; si < states.size(); ++si)
          for (uint8_t f : fit[si]) {
            const OptimizerState os = states[si];
            Estimate e = finish_staged(s.plan, s.times, s.kinds[f], overlap_of(f), os, ch.batch_tokens);
            out.candidates.push_back({e.time_s, out.grid_index, uint32_t(rc), uint32_t(v), uint16_t(mb), oi,
                                      uint8_t(f | (os.offload ? kOffload : 0) | (os.sharded ? kShard : 0) |
                                              (sp ? kSp : 0))});
            note_time(s, e.time_s, top);
          }
      }
    }
    if (!any_fit) break;
  }
}

// Runs each of n items once on `threads` threads, the calling one included,
// handing them out one at a time in index order (their costs differ by
// orders of magnitude); `make_worker()` gives a thread its worker, called
// with each item's index. The first failure is rethrown once all stopped.
template <class MakeWorker>
void for_each_on_threads(size_t n, int threads, MakeWorker make_worker) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> failed(static_cast<size_t>(threads));
  auto work = [&](int t) {
    try {
      auto worker = make_worker();
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) worker(i);
    } catch (...) {
      failed[size_t(t)] = std::current_exception();
      next = n;  // the others stop after their current item
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work, t);
  work(0);
  for (auto& h : helpers) h.join();
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
}

// The divisible grids in grid order (the early grids' times bound the later
// ones best), each thread with its own scratch and all with one bound.
void price_grids(const Job& job, const MachineProfile& p, const SearchOptions& opt, const Choices& ch,
                 const std::vector<Grid>& grids, std::vector<GridShare>& shares, int threads) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < grids.size(); ++i)
    if (!shares[i].micro_batches.empty()) todo.push_back(i);
  SharedBound bound;
  for_each_on_threads(todo.size(), threads, [&] {
    return [&, s = Scratch{LinkCache(p, job.gpus), {}, {}, {}, {}, {}, {}, &bound}](size_t i) mutable {
      price_grid(job, p, opt, ch, grids[todo[i]], s, shares[todo[i]]);
    };
  });
}

}  // namespace

SearchResult search(const Job& job, const MachineProfile& p, const SearchOptions& opt) {
  auto start = std::chrono::steady_clock::now();
  if (opt.threads < 0) input_error("threads " + std::to_string(opt.threads) + ": expected 0 (every core) or more");
  SearchResult r;
  std::map<std::string, long long> split_counts;
  r.smallest_footprint = 1e300;

  Choices ch;
  auto asked = [&](Recompute rc) { return std::find(opt.recompute.begin(), opt.recompute.end(), rc) != opt.recompute.end(); };
  for (Recompute rc : {Recompute::Full, Recompute::Selective, Recompute::None}) {
    const bool same_as_none = rc == Recompute::Selective && !recomputes_attention_core(rc, job.model) &&
                              asked(Recompute::None);
    if (asked(rc) && !same_as_none) ch.recompute.push_back(rc);
  }
  if (ch.recompute.empty()) input_error("no recompute setting to try");
  if (opt.offload_on && p.has_host) ch.offload.push_back(true);
  if (opt.offload_off) ch.offload.push_back(false);
  if (opt.shard_on) ch.shard.push_back(true);
  if (opt.shard_off) ch.shard.push_back(false);
  ch.tp_overlap = job.fusion == Fusion::Fused && (!opt.fixed_overlap || opt.overlap.otp);
  ch.capacity = p.hbm_capacity;
  ch.host_capacity = p.has_host ? host_memory_per_gpu(p) : 0;
  ch.batch_tokens = double(job.batch) * job.model.seq_len;

  std::vector<Grid> grids;
  for (int P : pipeline_choices(job, opt))
    for (Grid g : factorizations(job.gpus / P)) {
      g.p = P;
      grids.push_back(g);
    }
  // Divisibility first, in grid order: it numbers the divisible grids.
  std::vector<GridShare> shares(grids.size());
  for (size_t i = 0; i < grids.size(); ++i) {
    const Grid& g = grids[i];
    ++r.grids_total;
    if (std::string why = split_problem(job, g, 1); !why.empty()) {
      ++split_counts[reason_kind(why)];
      if (opt.keep_rejected) shares[i].rejected.push_back({g, 0, Recompute::None, why});
      continue;
    }
    shares[i].micro_batches = micro_batch_choices(job, g, opt);
    if (shares[i].micro_batches.empty()) {
      ++split_counts["no requested micro-batch divides the batch share of G_z·G_data"];
      continue;
    }
    ++r.grids_divisible;
    shares[i].grid_index = uint32_t(r.grids.size());
    r.grids.push_back(g);
  }

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  r.threads = int(std::min<long long>(opt.threads > 0 ? opt.threads : cores, std::max(1LL, r.grids_divisible)));
  price_grids(job, p, opt, ch, grids, shares, r.threads);

  size_t total = 0;
  for (const GridShare& s : shares) total += s.candidates.size();
  r.candidates.reserve(total);
  for (GridShare& s : shares) {
    r.evaluated += s.evaluated;
    r.feasible += s.feasible;
    r.candidates.insert(r.candidates.end(), s.candidates.begin(), s.candidates.end());
    std::vector<Candidate>().swap(s.candidates);
    std::move(s.rejected.begin(), s.rejected.end(), std::back_inserter(r.rejected));
    if (s.smallest_footprint < r.smallest_footprint) {
      r.smallest_footprint = s.smallest_footprint;
      r.smallest_config = s.smallest_config;
    }
  }
  for (const auto& [why, n] : split_counts)
    r.split_reasons.push_back(std::to_string(n) + (n == 1 ? " grid: " : " grids: ") + why);

  // Rank: fastest first, fewer flags on a tie. Keep the configurations that
  // could still overtake the top ones under ±20% on a tier (within 1.5× of
  // the top-th's time, see sensitivity.hpp), sorted; drop the rest.
  auto faster = [](const Candidate& a, const Candidate& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    auto key = [](const Candidate& c) {  // recompute and interleaving count as one flag each
      return std::make_tuple(std::popcount(c.flags) + (c.recompute != 0) + (c.virtual_stages > 1), uint32_t(c.grid),
                             c.micro_batch, c.flags, uint32_t(c.recompute), uint32_t(c.virtual_stages), c.order);
    };
    return key(a) < key(b);
  };
  if (!r.candidates.empty()) {
    size_t top = std::min<size_t>(std::max(opt.top, 1), r.candidates.size());
    std::nth_element(r.candidates.begin(), r.candidates.begin() + long(top - 1), r.candidates.end(), faster);
    double limit = 1.5 * r.candidates[top - 1].time_s;
    auto end = std::partition(r.candidates.begin(), r.candidates.end(),
                              [&](const Candidate& c) { return c.time_s <= limit; });
    r.candidates.erase(end, r.candidates.end());
    std::sort(r.candidates.begin(), r.candidates.end(), faster);
    // Placements that differ only in order and cost exactly the same are one
    // answer: keep the first (xyzd-most) and count the others.
    std::vector<Candidate> kept;
    for (const Candidate& c : r.candidates) {
      bool same = false;
      for (size_t k = kept.size(); k-- > 0 && kept[k].time_s == c.time_s;)
        if (kept[k].grid == c.grid && kept[k].micro_batch == c.micro_batch && kept[k].flags == c.flags &&
            kept[k].recompute == c.recompute && kept[k].virtual_stages == c.virtual_stages) {
          ++r.equivalent_orders[k];
          same = true;
          break;
        }
      if (same) continue;
      kept.push_back(c);
      r.equivalent_orders.push_back(0);
    }
    r.candidates = std::move(kept);
    top = std::min(top, r.candidates.size());
    // In full, on the threads too: a deep pipeline's schedule is simulated
    // event by event.
    r.top.resize(top);
    for_each_on_threads(top, std::min<int>(r.threads, int(top)), [&] {
      return [&](size_t i) {
        Config cfg = candidate_config(r.candidates[i], r.grids, job.dtype);
        Prediction pr = predict(job, p, cfg);
        r.top[i] = {cfg, pr.estimate, pr.memory, r.equivalent_orders[i]};
      };
    });
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ff
