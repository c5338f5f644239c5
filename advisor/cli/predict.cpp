// advisor predict: one configuration, explained term by term.
#include <cmath>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "advisor/cli/job_options.hpp"
#include "advisor/cli/recommend_report.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/option_groups.hpp"
#include "advisor/model/memory_json.hpp"
#include "advisor/model/prediction.hpp"
#include "advisor/output/format.hpp"
#include "advisor/output/launch.hpp"

namespace ff::advisor {

namespace {

// The recompute setting in words; selective with flash attention says it is none.
std::string recompute_words(Recompute r, const ModelSpec& m) {
  switch (r) {
    case Recompute::None: return "no recompute";
    case Recompute::Full: return "full recompute";
    case Recompute::Selective:
      return recomputes_attention_core(r, m)
                 ? "selective recompute (the attention core)"
                 : "selective recompute (priced as none: flash attention keeps no S×S to drop and recomputes its "
                   "scores in backward already)";
  }
  return "?";
}

struct PredictOptions {
  JobOptions job;
  ConfigFlags config;
  bool json = false;
};

std::string pair_text(const PairLink& l) {
  std::string s;
  if (l.inside) s += "inside a node";
  if (l.across)
    s += std::string(s.empty() ? "" : " and ") + "across nodes, " + std::to_string(l.pairs_per_node) +
         (l.pairs_per_node == 1 ? " pair per node" : " pairs per node");
  return s + (l.measured ? "" : " (priced as a 2-rank all-gather)");
}

// Interleaved, stage i's chunk c is virtual stage c·P + i: `chunk` blocks
// from (c·P + i)·chunk.
std::string stage_chunks(const Stage& s, int P, int v) {
  const int chunk = s.blocks / v;
  std::string h;
  for (int c = 0; c < v; ++c) {
    const int from = (c * P + s.index) * chunk;
    h += (c ? ", " : "") + std::to_string(from) + "–" + std::to_string(from + chunk - 1);
  }
  h = std::to_string(v) + " chunks (" + h + ")";
  if (s.first) h = "embedding + " + h;
  if (s.last) h += " + final LN, LM head, loss";
  return h;
}

std::string stage_holds(const Stage& s) {
  std::string h = s.blocks == 1 ? "block " + std::to_string(s.first_block)
                                : std::to_string(s.blocks) + " blocks (" + std::to_string(s.first_block) + "–" +
                                      std::to_string(s.first_block + s.blocks - 1) + ")";
  if (s.first) h = "embedding + " + h;
  if (s.last) h += " + final LN, LM head, loss";
  return h;
}

// Per stage: what it holds, f and b per micro-batch, its step after the
// flush, its memory (MODEL.md §9).
nlohmann::json pipeline_json(const Prediction& pr) {
  const Grid& g = pr.config.grid;
  const int v = pr.config.virtual_stages;
  nlohmann::json j = {{"stages", g.p},
                      {"virtual_stages", v},
                      {"order", v > 1 ? "interleaved 1F1B" : pr.static_order ? "static 1F1B" : "arrival (message-driven)"},
                      {"message_bytes", pr.staged.plan[0].message_elements * dtype_bytes(pr.config.dtype)},
                      {"message_s", pr.message_s},
                      {"messages", pr.staged.blocking_messages ? "blocking" : "overlapped"},
                      {"per_micro_s", pr.schedule.per_micro_s},
                      {"drained_s", pr.schedule.drained_s},
                      {"critical_stage", pr.schedule.critical_stage},
                      {"simulated_time_s", pr.simulated.time_s},
                      {"bubble_s", pr.estimate.bubble_s}};
  j["per_stage"] = nlohmann::json::array();
  const auto st = stage_times(pr.staged, pr.per_kind);
  const double message_bytes = pr.staged.plan[0].message_elements * dtype_bytes(pr.config.dtype);
  for (int i = 0; i < g.p; ++i) {
    const MemoryUse& u = pr.stage_memory[i];
    const Plan& plan = pr.staged.plan[pr.staged.kinds.kind_of(i)];
    // What the stage sends on P: activations forward (all but the last),
    // gradients backward (all but the first), one per micro-batch each;
    // besides the tied embedding's all-reduce, where there is one.
    PerAxis<double> bytes = bytes_per_step(plan, pr.config.shard_optimizer);
    // Interleaved, a micro-batch crosses every stage boundary v times, the
    // last stage's into the first's (chunk c to c + 1) included.
    const double sends = v == 1 ? double((i + 1 < g.p) + (i > 0)) : 2.0 * v - (i + 1 == g.p) - (i == 0);
    bytes[int(Axis::P)] += message_bytes * double(plan.micro_steps) * sends;
    j["per_stage"].push_back({{"stage", i}, {"holds", v > 1 ? stage_chunks(pr.staged.kinds.each[size_t(i)], g.p, v)
                                             : stage_holds(pr.staged.kinds.each[size_t(i)])},
                              {"in_flight", in_flight(g, pr.staged.plan[0].micro_steps, i, v)},
                              {"fwd_s", st[i].f}, {"bwd_s", st[i].b}, {"step_s", st[i].step},
                              {"bytes_per_step", per_axis_json(bytes)},
                              {"memory_gib", u.total() / 1073741824.0},
                              {"activations_gib", u.activations / 1073741824.0},
                              {"states_gib", u.states / 1073741824.0}});
  }
  return j;
}

std::string link_text(const AxisLink& l) {
  if (l.size <= 1) return "-";
  std::string s;
  if (l.inside) s += "inside a node";
  if (l.across) {
    s += std::string(s.empty() ? "" : " and ") + "across nodes, " + std::to_string(l.groups_per_node) +
         (l.groups_per_node == 1 ? " group per node" : " groups per node");
    if (l.members_per_node > 1) s += ", " + std::to_string(l.members_per_node) + " members per node";
  }
  return s;
}

// Slow links (CPU ranks over TCP) in MB/s: "0.0 GB/s" says nothing.
std::string bandwidth(double bytes_per_s) {
  return bytes_per_s < 1e9 ? fixed(bytes_per_s / 1e6, 1) + " MB/s" : fixed(bytes_per_s / 1e9, 1) + " GB/s";
}

// The bus bandwidth a collective of `bytes` is priced at: the tier that sets its time.
double binding_busbw(const AxisLink& l, Coll c, double bytes, bool nonblocking) {
  // That collective's own figure where it was measured apart (by_op, nonblocking_by_op).
  const int k = static_cast<int>(c) + (nonblocking ? 3 : 0);
  if (!l.across) return l.intra_busbw[k];
  if (!l.inside) return l.inter_busbw[k];
  AxisLink one_tier = l;
  one_tier.inside = false;
  return collective_time(c, bytes, one_tier, nonblocking) >= collective_time(c, bytes, l, nonblocking)
             ? l.inter_busbw[k]
             : l.intra_busbw[k];
}

void print_pipeline(const Prediction& pr, const MachineProfile& m) {
  const Grid& g = pr.config.grid;
  const Plan& p0 = pr.staged.plan[0];
  const double bytes = p0.message_elements * dtype_bytes(pr.config.dtype);
  const int v = pr.config.virtual_stages;
  std::cout << "\nPipeline: " << g.p << " stages, " << p0.micro_steps << " micro-batches per pipeline, "
            << (v > 1 ? "interleaved 1F1B, " + std::to_string(v) + " model chunks per stage (Megatron's order)"
                : pr.static_order
                    ? "static 1F1B order (a stage has tensor axes: its ranks must issue the same collectives)"
                    : "arrival order (message-driven)")
            << "\n  stage messages: " << bytes_h(bytes) << " each way per micro-batch, " << pair_text(pr.pairs) << ", "
            << seconds(pr.message_s) << " each"
            << (pr.staged.blocking_messages ? ", blocking: each paid by its sender on every micro-batch"
                                            : ", overlapped: paid in the fill and drain")
            << "\n";
  Table t({"stage", "<holds", "fwd/mb", "bwd/mb", "step", "in flight", "memory GiB"});
  const auto st = stage_times(pr.staged, pr.per_kind);
  for (int i = 0; i < g.p; ++i) {
    t.row({std::to_string(i) + (i == pr.schedule.critical_stage ? " *" : ""),
           v > 1 ? stage_chunks(pr.staged.kinds.each[size_t(i)], g.p, v) : stage_holds(pr.staged.kinds.each[size_t(i)]),
           seconds(st[i].f),
           seconds(st[i].b), seconds(st[i].step), fixed(in_flight(g, p0.micro_steps, i, v), v > 1 ? 1 : 0),
           gib(pr.stage_memory[i].total()) + " of " + gib(m.hbm_capacity)});
  }
  std::cout << t.str("  ");
  const double idle = pr.estimate.bubble_s / pr.estimate.time_s;
  std::cout << "  per micro-batch u " << seconds(pr.schedule.per_micro_s) << ", drained at " << seconds(pr.schedule.drained_s)
            << "; iteration " << seconds(pr.schedule.time_s) << " (stage * sets it), idle " << fixed(100 * idle, 1)
            << "%\n  simulated event by event: " << seconds(pr.simulated.time_s) << " (the closed form is "
            << fixed(100 * std::abs(pr.schedule.time_s / pr.simulated.time_s - 1), 1) << "% "
            << (pr.schedule.time_s >= pr.simulated.time_s ? "above" : "below") << " it)\n";
}

void run(const PredictOptions& o) {
  LoadedJob l = load_job(o.job);
  Config c = config_of(o.config);
  c.dtype = l.job.dtype;
  check_grid_gpus(l.job, c.grid);
  check_optimizer_state(l.machine, {c.offload, c.shard_optimizer});
  const Job& job = l.job;
  const MachineProfile& m = l.machine;
  Prediction pr = predict(job, m, c);
  const Plan& plan = pr.plan;
  const Estimate& e = pr.estimate;
  const bool host_fits = pr.memory.host <= host_memory_per_gpu(m);  // 0 without offload
  const bool fits = fits_in_memory(pr.memory, m);
  const PredictedRange range = predicted_range(job, m, c);

  if (o.json) {
    nlohmann::json out = to_json(c);
    out["model"] = job.model.name;
    out["machine"] = m.name;
    out["gpus"] = job.gpus;
    out["batch_sequences"] = job.batch;
    out["seq_len"] = job.model.seq_len;
    out["micro_steps"] = plan.micro_steps;
    out["time_s"] = e.time_s;
    out["compute_s"] = e.compute_s;
    out["contention_s"] = e.contention_s;  // of compute_s: slowed under the collectives it hides
    out["fusion"] = fusion_name(job.fusion);
    out["collective_form"] = collective_form_name(m.collectives);
    out["grad_dtype"] = dtype_name(job.grad_dtype);
    out["launches"] = plan.launches;
    out["exposed_comm_s"] = per_axis_json(e.exposed_comm_s);
    out["comm_s"] = per_axis_json(e.comm_s);
    out["memory_gib"] = pr.memory.total() / 1073741824.0;
    out["fits"] = fits;
    out["mfu"] = e.mfu;
    out["hfu"] = e.hfu;
    out["tokens_per_s"] = e.tokens_per_s;
    out["range"] = range_json(m, range);
    if (c.grid.p > 1) out["pipeline"] = pipeline_json(pr);
    out["pipeline_idle_s"] = e.bubble_s;
    out["host_link_s"] = e.host_s;
    out["sync_s"] = e.sync_s;  // the end-of-step scalar all-reduces over all ranks
    if (c.overlap.odp)
      out["odp"] = {{"buckets", pr.dp_buckets},
                    {"bucket_bytes", plan.dp_bucket_bytes},
                    {"bucket_s", pr.dp_bucket_s},
                    {"exposed_s", e.exposed_comm_s[int(Axis::D)]}};
    if (c.offload)
      out["offload"] = {{"host_bytes_per_gpu", pr.memory.host},
                        {"host_memory_per_gpu", host_memory_per_gpu(m)},
                        {"copy_bytes_each_way", pr.plan.host_copy_bytes},
                        {"copy_s", pr.host_copy_s},
                        {"chunks", pr.plan.offload_chunks},
                        {"exposed_s", e.host_s}};
    out["launch"] = launch_json(launch_lines(job, o.job.model, m, c, std::max(0, o.job.seq_len)));
    out["collectives"] = nlohmann::json::array();
    for (size_t i = 0; i < plan.comm.size(); ++i) {
      const CommTerm& t = plan.comm[i];
      double per_it = per_iteration(plan, t);
      out["collectives"].push_back({{"layer", t.layer}, {"what", t.what}, {"axis", axis_name(t.axis)},
                                    {"collective", coll_name(t.coll)}, {"elements", t.elements},
                                    {"bytes", t.bytes()}, {"per_iteration", per_it},
                                    {"nonblocking", issued_nonblocking(t.hide, c.overlap)},
                                    {"seconds_each", issued_seconds(plan, pr.term_seconds.data(), c.overlap, i)},
                                    {"hidden_each", pr.term_hidden[i]}});
    }
    out["bytes_per_step"] = per_axis_json(bytes_per_step(plan, c.shard_optimizer));
    out["compute"] = nlohmann::json::array();
    for (const auto& w : plan.compute)
      out["compute"].push_back({{"layer", w.layer}, {"what", w.what}, {"class", kernel_class_name(w.cls)},
                                {"launches_each", w.launches}, {"seconds_each", w.seconds},
                                {"per_iteration", per_iteration(plan, w)}});
    const MemoryUse& u = pr.memory;
    out["memory_bytes"] = memory_json(u);
    std::cout << out.dump(2) << "\n";
    if (!host_fits)
      throw NoConfigError("offload needs " + gib(u.host) + " GiB of host memory per GPU, " +
                          gib(host_memory_per_gpu(m)) + " GiB there");
    if (!fits) throw NoConfigError("configuration needs " + gib(pr.memory.total()) + " GiB of " + gib(m.hbm_capacity) + " GiB per GPU");
    return;
  }

  std::cout << job.model.name << " on " << grouped(job.gpus) << " × " << m.name << ", grid " << c.grid.str()
            << (c.grid.p > 1 ? ", " + std::to_string(c.grid.p) + " pipeline stages," : std::string())
            << " order " << c.order.str() << ", micro-batch " << c.micro_batch << " (" << grouped((long long)plan.tokens)
            << " tokens per rank), " << plan.micro_steps << " micro-step" << (plan.micro_steps == 1 ? "" : "s")
            << ", " << recompute_words(c.recompute, job.model) << ", overlap " << c.overlap.str()
            << (c.offload ? ", offload" : "") << (c.shard_optimizer ? ", optimizer sharded over data" : "") << ", "
            << dtype_name(c.dtype) << ", " << fusion_name(job.fusion) << " kernels" << collectives_words(m)
            << "\n\nPlacement (" << m.gpus_per_node << " GPUs per node):\n";
  Table place({"<axis", "size", "stride", "<groups", "busbw", "α"});
  for (Axis a : kAxes) {
    const AxisLink& k = pr.links[int(a)];
    std::string bw, alpha;
    if (a == Axis::P && k.size > 1) {  // stage messages between pairs, not collectives
      const PairLink& q = pr.pairs;
      const P2PLink& b = q.across ? q.inter : q.intra;
      place.row({axis_name(a), std::to_string(c.grid.size(a)), std::to_string(axis_stride(c.grid, c.order, a)),
                 "pairs " + pair_text(q), bandwidth(b.bw) + " each way", fixed(b.alpha_s * 1e6, 1) + " µs"});
      continue;
    }
    if (k.size > 1) {
      const LinkParams& b = k.across ? k.inter : k.intra;
      bw = bandwidth(b.busbw);
      alpha = fixed(b.alpha_s * 1e6, 1) + " µs";
      if (k.inside && k.across) bw = bandwidth(k.intra.busbw) + " / " + bw;
    }
    place.row({axis_name(a), std::to_string(c.grid.size(a)), std::to_string(axis_stride(c.grid, c.order, a)),
               link_text(k), bw, alpha});
  }
  std::cout << place.str("  ");
  if (c.grid.p > 1) print_pipeline(pr, m);

  std::cout << "\nCommunication per iteration" << (c.grid.p > 1 ? " of stage " + std::to_string(pr.schedule.critical_stage) : "")
            << " (each: one call, * issued non-blocking; hidden: under compute, per call):\n";
  Table comm({"<layer", "<collective", "<axis", "elements", "bytes", "calls/it", "busbw", "each", "hidden", "exposed/it"});
  for (size_t i = 0; i < plan.comm.size(); ++i) {
    const CommTerm& t = plan.comm[i];
    double calls = per_iteration(plan, t);
    bool nb = issued_nonblocking(t.hide, c.overlap);
    double each = issued_seconds(plan, pr.term_seconds.data(), c.overlap, i);
    comm.row({t.layer, t.what + std::string(nb ? " *" : ""), axis_name(t.axis), si(t.elements, ""), bytes_h(t.bytes()),
              grouped((long long)calls), bandwidth(binding_busbw(pr.links[int(t.axis)], t.coll, t.bytes(), nb)),
              seconds(each), seconds(pr.term_hidden[i]), seconds(calls * (each - pr.term_hidden[i]))});
  }
  std::cout << comm.str("  ");

  std::cout << "\nCompute per iteration" << (c.grid.p > 1 ? " of stage " + std::to_string(pr.schedule.critical_stage) : "")
            << ", by layer:\n";
  std::map<std::string, double> by_layer;
  Table work({"<layer", "<what", "<class", "kernels", "each", "calls/it", "total/it"});
  for (const auto& w : plan.compute) {
    double calls = per_iteration(plan, w);
    by_layer[w.layer] += calls * w.seconds;
    work.row({w.layer, w.what, kernel_class_name(w.cls), fixed(w.launches, w.launches == std::floor(w.launches) ? 0 : 2),
              seconds(w.seconds), grouped((long long)calls), seconds(calls * w.seconds)});
  }
  std::cout << work.str("  ");
  std::cout << "  " << grouped((long long)std::llround(plan.launches)) << " kernel launches per iteration ("
            << fusion_name(job.fusion) << " kernels, " << fixed(m.launch_s * 1e6, 1) << " µs each beyond their work)";
  if (e.contention_s > 0)
    std::cout << "; compute " << seconds(e.contention_s) << " slower under the collectives it hides ("
              << fixed(100 * m.compute_slowdown, 0) << "% while one is in flight)";
  std::cout << "\n";

  const MemoryUse& u = pr.memory;
  std::cout << "\nMemory per GPU" << (c.grid.p > 1 ? " (the stage that needs the most)" : "") << ":\n";
  Table mem({"<term", "GiB"});
  const std::string grads = std::string(dtype_name(job.grad_dtype)) + " grad shards";
  mem.row({c.offload           ? "weights + " + grads + " (master, m, v offloaded)"
           : c.shard_optimizer ? "weights + " + grads + " + 1/" + std::to_string(c.grid.d) + " of master, m, v"
                               : "weights + optimizer state + " + grads,
           gib(u.states)});
  if (c.offload)
    mem.row({low_precision(c.dtype) ? "optimizer bucket buffers (2 × fp32 master, m, v)"
                                    : "optimizer bucket buffers (2 × fp32 m, v)",
             gib(u.buckets)});
  mem.row({std::string("gathered weights") + (c.overlap.oag ? " (current + prefetched)" : ""), gib(u.gathered)});
  mem.row({std::string("unsharded gradient buffers") + (c.overlap.ors ? " (2 in flight)" : ""), gib(u.grad_buffers)});
  const char* kept = c.recompute == Recompute::Full ? "activations (layer inputs + one layer)"
                     : recomputes_attention_core(c.recompute, job.model)
                         ? "activations (all layers, the S×S probabilities of one)"
                         : "activations (all layers)";
  mem.row({kept, gib(u.activations)});
  mem.row({"logits + fp32 gradient", gib(u.logits)});
  mem.row({"reserve", gib(u.reserve)});
  mem.row({"total", gib(u.total()) + " of " + gib(m.hbm_capacity)});
  if (c.offload) mem.row({"host memory: master, m, v", gib(u.host) + " of " + gib(host_memory_per_gpu(m))});
  std::cout << mem.str("  ");
  if ((c.shard_optimizer || c.overlap.odp) && c.grid.d == 1)
    std::cout << "\nG_data = 1: " << (c.shard_optimizer ? "--shard-optimizer" : "odp")
              << " changes nothing here (no data-parallel reduction to shard or hide)\n";
  if (c.shard_optimizer && c.grid.d > 1)
    std::cout << "\nOptimizer state sharded over data (" << c.grid.d << " ways): the gradients reduce-scattered"
              << (c.overlap.odp ? " (in the buckets below)" : " layer by layer")
              << " and the updated weights all-gathered, in place of the all-reduces above; the optimizer on 1/"
              << c.grid.d << " of the state\n";
  if (c.overlap.odp && c.grid.d > 1)
    std::cout << "\nData-parallel gradients (odp): " << fixed(pr.dp_buckets, 0) << " buckets of up to "
              << bytes_h(plan.dp_bucket_bytes) << ", each " << (c.shard_optimizer ? "reduce-scattered" : "all-reduced")
              << " in " << seconds(pr.dp_bucket_s) << " (in place of the per-layer all-reduces above), started as the "
              << "last micro-step's backward produces them; data axis " << seconds(e.comm_s[int(Axis::D)])
              << ", exposed " << seconds(e.exposed_comm_s[int(Axis::D)]) << "\n";
  if (c.offload)
    std::cout << "\nOffload: " << bytes_h(pr.plan.host_copy_bytes) << " each way per iteration over the host link at "
              << bandwidth(pr.plan.host_bw) << " (every GPU of a node copying at once), both ways at once in "
              << fixed(pr.plan.offload_buckets, 0) << " bucket" << (pr.plan.offload_buckets > 1 ? "s" : "")
              << " (the first in and the last out alone): " << seconds(pr.host_copy_s)
              << ", overlapped with the data-parallel all-reduce in " << fixed(pr.plan.offload_chunks, 0)
              << " chunks of " << kOffloadChunk << " buckets; exposed " << seconds(e.host_s) << "\n";

  std::cout << "\nTime per iteration " << seconds(e.time_s) << " = compute " << seconds(e.compute_s)
            << " + exposed";
  for (Axis a : kAxes)
    if (a != Axis::P || c.grid.p > 1)
      std::cout << (a == kAxes[0] ? " " : ", ") << axis_name(a) << " " << seconds(e.exposed_comm_s[int(a)]);
  if (c.offload) std::cout << " + host link " << seconds(e.host_s);
  if (c.grid.p > 1) std::cout << " + pipeline idle " << seconds(e.bubble_s);
  if (e.sync_s > 0) std::cout << " + loss and gradient-norm all-reduces over all ranks " << seconds(e.sync_s);
  std::cout << "\n"
            << "MFU " << fixed(100 * e.mfu, 1) << "%, HFU " << fixed(100 * e.hfu, 1) << "%, "
            << si(e.tokens_per_s, "tokens/s") << "\n"
            << "Range " << seconds(range.low) << " – " << seconds(range.high) << " (" << range_basis(m)
            << "; MODEL.md §8)\n";
  std::cout << "\nLaunch:\n";
  std::cout << launch_text(launch_lines(job, o.job.model, m, c, std::max(0, o.job.seq_len)));
  if (!host_fits)
    throw NoConfigError("does not fit: offload needs " + gib(u.host) + " GiB of host memory per GPU, " +
                        gib(host_memory_per_gpu(m)) + " GiB there (more data or tensor parallelism shares it)");
  if (!fits)
    throw NoConfigError("does not fit: needs " + gib(u.total()) + " GiB of " + gib(m.hbm_capacity) +
                        " GiB per GPU (try --recompute, a smaller --micro-batch, or a larger G_z)");
}

}  // namespace

void setup_predict(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* sub = app.add_subcommand("predict", "Explain one configuration: every collective, compute, memory");
  add_job_options(sub, o->job);
  add_config_options(*sub, o->config);
  sub->get_option("--grid")->required();  // no default: the grid is what predict explains
  sub->add_flag("--json", o->json, "Print JSON");
  sub->callback([o] { run(*o); });
}

}  // namespace ff::advisor
