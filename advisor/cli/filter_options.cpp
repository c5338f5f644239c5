#include "advisor/cli/filter_options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "advisor/cli/job_options.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/option_groups.hpp"

namespace ff::advisor {

void add_filter_options(CLI::App& app, FilterFlags& f) {
  auto group = [](CLI::Option* o) { return o->group(kFilterGroup); };
  group(app.add_option("--micro-batch", f.micro_batches, "Only these micro-batch sizes (sequences per rank), e.g. 1,2")
            ->delimiter(','));
  group(app.add_option("--max-micro-batch", f.max_micro_batch, "Largest micro-batch tried")->capture_default_str());
  auto* rc = group(app.add_option("--recompute", f.recompute,
                                  "Only these recompute settings: none, selective, full (bare: full)")
                       ->expected(0, 3)
                       ->delimiter(','));
  group(app.add_flag("--no-recompute", f.no_recompute, "Only configurations without recompute")->excludes(rc));
  auto* off = group(app.add_flag("--offload", f.offload,
                                 "Only configurations with the optimizer state offloaded to host memory"));
  group(app.add_flag("--no-offload", f.no_offload, "Only configurations without offload")->excludes(off));
  auto* zero = group(app.add_flag("--shard-optimizer", f.shard_optimizer,
                                  "Only configurations with the optimizer state sharded over the data axis (ZeRO-1)"));
  group(app.add_flag("--no-shard-optimizer", f.no_shard_optimizer, "Only configurations without a sharded optimizer")
            ->excludes(zero));
  auto* sp = group(app.add_flag("--sequence-parallel", f.sequence_parallel,
                                "Only configurations with sequence parallelism wherever G_y > 1"));
  group(app.add_flag("--no-sequence-parallel", f.no_sequence_parallel, "Only configurations without sequence parallelism")
            ->excludes(sp));
  group(app.add_option("--pipeline", f.pipelines,
                       "Only these pipeline stage counts, e.g. 1,2,4 [every divisor of the layers and GPUs]")
            ->delimiter(','));
  group(app.add_option("--virtual-stages", f.virtual_stages,
                       "Only these model-chunk counts per stage (interleaved 1F1B where not 1), e.g. 1,2,4 [1,2]")
            ->delimiter(','));
  group(app.add_option("--order", f.order,
                       "Only this placement order (innermost first, e.g. xyzpd; xyzd places p inside d)"));
  group(app.add_option("--overlap", f.overlap, "Only these overlap flags (oar,ors,oag,odp | none | all)"));
}

SearchOptions search_filters(const FilterFlags& f, const Job& job, const MachineProfile& m, bool state_when_asked) {
  SearchOptions so;
  for (int mb : f.micro_batches) at_least("--micro-batch", mb, 1, "sequences per rank");
  so.micro_batches = f.micro_batches;
  so.max_micro_batch = int(at_least("--max-micro-batch", f.max_micro_batch, 1, "sequences per rank"));
  if (f.no_recompute) so.recompute = {Recompute::None};
  if (!f.recompute.empty()) {
    so.recompute.clear();
    for (const std::string& v : f.recompute) {
      const Recompute r = recompute_flag({v});
      if (std::find(so.recompute.begin(), so.recompute.end(), r) == so.recompute.end()) so.recompute.push_back(r);
    }
  }
  if (!f.order.empty()) so.fixed_order = true, so.order = flag_value("--order", [&] { return parse_order(f.order); });
  if (!f.overlap.empty())
    so.fixed_overlap = true, so.overlap = flag_value("--overlap", [&] { return parse_overlap(f.overlap); });
  check_pipelines(job, f.pipelines);
  so.pipelines = f.pipelines;
  for (int v : f.virtual_stages) at_least("--virtual-stages", v, 1, "model chunks per stage");
  if (!f.virtual_stages.empty()) so.virtual_stages = f.virtual_stages;
  check_optimizer_state(m, {f.offload, f.shard_optimizer});
  so.offload_off = !f.offload;
  so.offload_on = state_when_asked ? f.offload : !f.no_offload;
  so.shard_off = !f.shard_optimizer;
  so.shard_on = state_when_asked ? f.shard_optimizer : !f.no_shard_optimizer;
  so.sequence_parallel_off = !f.sequence_parallel;
  so.sequence_parallel_on = state_when_asked ? f.sequence_parallel : !f.no_sequence_parallel;
  return so;
}

}  // namespace ff::advisor
