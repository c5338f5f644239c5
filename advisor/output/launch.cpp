#include "advisor/output/launch.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "advisor/core/engine_args.hpp"

namespace ff {

namespace {

// The model's shape in Megatron-LM's flags. Megatron ties the embedding and
// the head unless told, learns absolute positions and uses LayerNorm, GELU
// and biases by default.
std::string megatron_model_flags(const ModelSpec& m) {
  auto s = [](long long v) { return std::to_string(v); };
  std::string f = " --num-layers " + s(m.layers) + " --hidden-size " + s(m.hidden) + " --num-attention-heads " +
                  s(m.heads) + " --ffn-hidden-size " + s(m.ffn) + " --max-position-embeddings " + s(m.seq_len);
  if (m.kv_head_count() != m.heads) f += " --group-query-attention --num-query-groups " + s(m.kv_head_count());
  if (m.head_size() * m.heads != m.hidden) f += " --kv-channels " + s(m.head_size());
  if (m.mlp == Mlp::SwiGlu) f += " --swiglu";
  if (m.norm == Norm::RmsNorm) f += " --normalization RMSNorm";
  if (m.positions == Positions::Rope) f += " --position-embedding-type rope";
  if (!m.bias) f += " --disable-bias-linear";
  if (!m.bias && m.qkv_bias) f += " --add-qkv-bias";
  if (!m.tied_embeddings) f += " --untie-embeddings-and-output-weights";
  return f;
}

}  // namespace

std::vector<LaunchLine> launch_lines(const Job& job, const std::string& model_arg, const MachineProfile& machine,
                                     const Config& c, int seq_len) {
  auto s = [](long long v) { return std::to_string(v); };
  const int per_node = machine.gpus_per_node;
  const long long G = c.grid.total();
  const long long nodes = (G + per_node - 1) / per_node;
  std::string device_note;
  // The engine's line without OTP, which the engine does not run (the note says so).
  Config engine_config = c;
  engine_config.overlap.otp = false;
  EngineArgs args =
      engine_args(model_arg, engine_config, job.batch, &device_note, machine.engine_device, job.grad_dtype);
  if (c.overlap.odp) args.dp_bucket_mib = machine.dp_bucket_bytes / 1048576;
  args.seq_len = seq_len;
  args.stage_layers = job.stage_layers;  // the engine computes the same partition otherwise
  std::string engine = "engine " + join_args(engine_argv(args));
  if (std::string why = engine_model_problem(job.model); !why.empty())
    device_note = "the engine cannot run this model (" + why + ")";
  else if (c.overlap.otp)
    device_note = "without otp: the engine does not pipeline its collectives with its GEMMs (Transformer Engine's "
                  "userbuffers)";
  else if (c.virtual_stages > 1 && args.device == "cuda")
    device_note = "the engine runs the interleaved schedule on its cpu and paced devices, not over NCCL yet: a line "
                  "to run once it can";
  // Gradients in the training dtype run as priced (--grad-dtype bf16); an
  // fp16 plan's line runs in fp32, gradients too, as engine_args' note says.
  std::vector<LaunchLine> out;
  out.push_back({"mpirun", "mpirun -np " + s(G) + " --map-by ppr:" + s(per_node) + ":node " + engine, device_note});
  out.push_back({"srun", "srun -N " + s(nodes) + " --ntasks-per-node " + s(per_node) + " -m block " + engine,
                 device_note});

  // AxoNN names: X = column (innermost), Y = row, Z = depth, inter = stages;
  // it places ranks column, row, depth, stage, data from the inside out,
  // i.e. order xyzpd.
  bool axonn_order = canonical_order(c.grid, c.order) == canonical_order(c.grid, Order());
  std::string placement_note =
      axonn_order ? "" : "AxoNN places ranks in order " + Order().str() + "; this placement (" + c.order.str() +
                             ") needs a custom rank mapping";
  out.push_back({"axonn",
                 "ax.init(G_inter=" + s(c.grid.p) + ", G_data=" + s(c.grid.d) + ", G_intra_r=" + s(c.grid.y) + ", G_intra_c=" +
                     s(c.grid.x) + ", G_intra_d=" + s(c.grid.z) + ", gpus_per_node=" + s(per_node) + ")",
                 placement_note});
  // Megatron's micro-batch is per data-parallel replica; AxoNN splits it over depth.
  std::string mega = "--column-tensor-model-parallel-size " + s(c.grid.x) + " --row-tensor-model-parallel-size " +
                     s(c.grid.y) + " --depth-tensor-model-parallel-size " + s(c.grid.z) +
                     " --pipeline-model-parallel-size " + s(c.grid.p) + " --micro-batch-size " + s(1LL * c.micro_batch * c.grid.z) +
                     " --global-batch-size " + s(job.batch) + " --seq-length " + s(job.model.seq_len) +
                     megatron_model_flags(job.model) +
                     (c.dtype == Dtype::BF16 ? " --bf16" : c.dtype == Dtype::FP16 ? " --fp16" : "");
  if (c.recompute == Recompute::Full)
    mega += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (c.recompute == Recompute::Selective) mega += " --recompute-granularity selective";
  if (c.overlap.oar) mega += " --overlap-axonn-comm";
  if (c.overlap.ors) mega += " --overlap-axonn-reduce-scatter";
  if (c.overlap.oag) mega += " --overlap-axonn-all-gather";
  if (c.overlap.odp) mega += " --overlap-grad-reduce";
  if (c.shard_optimizer) mega += " --use-distributed-optimizer";
  if (c.shard_optimizer && c.overlap.odp && job.fusion == Fusion::Fused) mega += " --overlap-param-gather";
  if (c.sequence_parallel) mega += " --sequence-parallel";
  if (c.overlap.otp) mega += " --tp-comm-overlap";
  if (c.virtual_stages > 1)
    mega += " --num-layers-per-virtual-pipeline-stage " + s(job.model.layers / (c.grid.p * c.virtual_stages));
  // Uneven stages: Megatron pins the first and the last run and spreads the
  // rest evenly, so a partition whose middle runs differ is not its to say.
  std::string mega_note = placement_note;
  const std::vector<int> blocks = stage_blocks(job.model, c.grid.p, job.stage_layers);
  if (std::adjacent_find(blocks.begin(), blocks.end(), std::not_equal_to<>()) != blocks.end()) {
    bool even_middle = true;
    for (size_t i = 2; i + 1 < blocks.size(); ++i) even_middle = even_middle && blocks[i] == blocks[1];
    if (even_middle)
      mega += " --decoder-first-pipeline-num-layers " + s(blocks.front()) + " --decoder-last-pipeline-num-layers " +
              s(blocks.back());
    else
      mega_note += std::string(mega_note.empty() ? "" : "; ") +
                   "the stages' blocks differ in the middle, which Megatron's --decoder-first/last-pipeline-num-layers "
                   "cannot pin";
  }
  // Megatron's 1F1B waits on each stage exchange; its interleaved schedule
  // overlaps them (MODEL.md §9).
  if (c.grid.p > 1 && c.virtual_stages == 1 && !job.blocking_messages)
    mega_note += std::string(mega_note.empty() ? "" : "; ") +
                 "Megatron's 1F1B waits on each stage message: --stage-messages blocking prices this line as it runs";
  // Megatron accumulates and reduces bf16 training's gradients in fp32 by
  // itself; fp16 training's only when told, and bf16's in bf16 when told.
  if (c.dtype == Dtype::FP16 && job.grad_dtype == Dtype::FP32) mega += " --accumulate-allreduce-grads-in-fp32";
  if (c.dtype == Dtype::BF16 && job.grad_dtype == Dtype::BF16) mega += " --grad-reduce-in-bf16";
  out.push_back({"megatron-axonn", mega, mega_note});
  return out;
}

std::string launch_text(const std::vector<LaunchLine>& lines) {
  std::string s;
  for (const LaunchLine& l : lines) {
    s += "  " + l.name + ":\n    " + l.line + "\n";
    if (!l.note.empty()) s += "    (" + l.note + ")\n";
  }
  return s;
}

nlohmann::json launch_json(const std::vector<LaunchLine>& lines) {
  nlohmann::json j = nlohmann::json::object();
  for (const LaunchLine& l : lines) {
    j[l.name] = {{"line", l.line}};
    if (!l.note.empty()) j[l.name]["note"] = l.note;
  }
  return j;
}

}  // namespace ff
