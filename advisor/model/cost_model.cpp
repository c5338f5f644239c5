#include "advisor/model/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "advisor/core/error.hpp"
#include "advisor/model/compute_model.hpp"

namespace ff {

namespace {

constexpr int kStatBytes = 4;  // LayerNorm and cross-entropy statistics are reduced in fp32

int prev_slot(int j) { return (j + kBlockLayers - 1) % kBlockLayers; }
int next_slot(int j) { return (j + 1) % kBlockLayers; }

}  // namespace

void make_plan(const Job& job, const MachineProfile& p, const Grid& g, int mb, Recompute rc, Plan& plan, const Stage& st,
               bool sequence_parallel) {
  const ModelSpec& m = job.model;
  const Dtype dt = job.dtype;
  const int b = dtype_bytes(dt);
  // Gradients leave their accumulator (fp32, or --grad-dtype) for the per-step reductions.
  const int grad_bytes = dtype_bytes(job.grad_dtype);
  // L: the blocks this stage runs (all of them without stages).
  const double L = st.blocks, H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  const double t = double(mb) * S;
  const double hx = H / g.x, fy = F / g.y, vy = Vp / g.y;
  // Full recompute runs each block's forward again; selective, the attention
  // core's alone (MODEL.md §13), where attention is unfused: flash attention's
  // backward recomputes its scores already, so there selective is none.
  const bool full = rc == Recompute::Full, selective = recomputes_attention_core(rc, m);
  const double fwd_count = L * (1 + full);

  plan.grid = g;
  plan.stage = st;
  plan.micro_batch = mb;
  plan.recompute = rc;
  // Sequence parallel (MODEL.md §13): the norm and residual regions hold t/G_y
  // tokens; Y's all-reduces become a reduce-scatter into them and an
  // all-gather out of them.
  const bool sp = sequence_parallel && g.y > 1;
  plan.sequence_parallel = sp;
  const double ty = sp ? t / g.y : t;
  plan.dtype = dt;
  plan.micro_steps = job.batch / (1LL * mb * g.z * g.d);
  plan.tokens = t;
  plan.comm.clear();
  plan.compute.clear();
  plan.overlap_efficiency = p.overlap_efficiency;
  plan.compute_slowdown = p.compute_slowdown;
  plan.nonblocking_slowdown = p.nonblocking_slowdown;
  // A stage sends its last block's output: split over Y under sequence
  // parallelism (Megatron's p2p tensors are [S/TP, b, H] then).
  plan.message_elements = ty * hx;
  {
    // All G ranks: inside one node, or every node's ranks across them.
    const long long G = g.total();
    plan.sync_s = 2 * collective_time(Coll::AllReduce, int(G), 8.0, world_link(p, G));
  }
  // Everything of a micro-step that is not its forward ("fwd …") is backward.
  auto backward = [](const char* what, bool per_step) { return !per_step && std::string_view(what).substr(0, 3) != "fwd"; };
  auto comm = [&](const char* layer, const char* what, Axis a, Coll c, double elems, int bytes, double count,
                  bool per_step = false, Hide hide = Hide::None, int slot = -1) {
    if (g.size(a) > 1)
      plan.comm.push_back({layer, what, a, c, elems, bytes, count, per_step, hide, slot, backward(what, per_step)});
  };
  auto work = [&](const char* layer, const char* what, KernelClass cls, double seconds, double launches, double count,
                  bool per_step = false) {
    plan.compute.push_back({layer, what, seconds, count, per_step, backward(what, per_step), cls, launches});
  };
  // A memory-bound term: its kernels' bytes and launches, each launch priced.
  auto mem = [&](const char* layer, const char* what, KernelClass cls, const MemoryKernels& k, double count,
                 bool per_step = false) {
    const double s = elementwise_time(p, cls, k.bytes, k.launches);
    work(layer, what, cls, s, k.launches, count, per_step);
    return s;
  };
  // Weight gradients reach the shard's accumulator: with G_z = 1 the
  // weight-gradient GEMM accumulates into it (β = 1, Megatron's gradient-
  // accumulation fusion), no pass of its own; with G_z > 1 the reduce-
  // scatter's output is added in, except on a step's first micro-step, which
  // writes it directly. Per micro-step: that share of a pass.
  const double accumulate_share =
      g.z == 1 ? 0.0 : double(plan.micro_steps - 1) / double(plan.micro_steps);

  // The block's linear layers (MODEL.md §1 table), with their GEMMs.
  const auto layers = block_layers(m);
  std::array<double, kBlockLayers> fwd_gemm{}, dgrad_gemm{}, wgrad_gemm{}, bias_columns{};
  std::array<bool, kBlockLayers> whole{};
  for (int j = 0; j < kBlockLayers; ++j) {
    const LinearLayer& l = layers[j];
    LocalWeight w = local_weight(l, g);
    Axis out_axis = l.transposed ? Axis::Y : Axis::X;  // partial sums of the output
    whole[j] = g.size(out_axis) == 1;  // (sequence parallel: Y > 1)
    Axis in_axis = l.transposed ? Axis::X : Axis::Y;   // partial sums of the input gradient
    comm(l.name, "fwd weight all-gather", Axis::Z, Coll::AllGather, w.gathered, b, fwd_count, false, Hide::OagForward, j);
    if (sp && !l.transposed)  // the input, out of the split region
      comm(l.name, "fwd input all-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * w.k_local, b, fwd_count,
           false, Hide::TpForward, j);
    if (sp && l.transposed)
      comm(l.name, "fwd output reduce-scatter (sequence parallel)", Axis::Y, Coll::ReduceScatter, t * w.n_local, b,
           fwd_count, false, Hide::TpForward, j);
    else
      comm(l.name, "fwd output all-reduce", out_axis, Coll::AllReduce, t * w.n_local, b, fwd_count);
    comm(l.name, "bwd weight all-gather", Axis::Z, Coll::AllGather, w.gathered, b, L, false, Hide::OagBackward, j);
    if (sp && l.transposed)  // the output's gradient, out of the split region
      comm(l.name, "bwd output-grad all-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * w.n_local, b, L,
           false, Hide::TpBackward, j);
    if (sp && !l.transposed) {
      comm(l.name, "bwd input-grad reduce-scatter (sequence parallel)", Axis::Y, Coll::ReduceScatter, t * w.k_local, b,
           L, false, Hide::SpReduceScatter, j);
      // The input was kept split: gathered again for the weight gradient.
      comm(l.name, "bwd input re-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * w.k_local, b, L, false,
           Hide::SpGather, j);
    } else {
      comm(l.name, "bwd input-grad all-reduce", in_axis, Coll::AllReduce, t * w.k_local, b, L, false, Hide::Oar, j);
    }
    comm(l.name, "bwd weight-grad reduce-scatter", Axis::Z, Coll::ReduceScatter, w.gathered, b, L, false, Hide::Ors, j);
    comm(l.name, "weight-grad all-reduce", Axis::D, Coll::AllReduce, w.shard, grad_bytes, L, true);
    fwd_gemm[j] = gemm_time(p, dt, t, w.n_local, w.k_local);
    dgrad_gemm[j] = gemm_time(p, dt, t, w.k_local, w.n_local);
    wgrad_gemm[j] = gemm_time(p, dt, w.k_local, w.n_local, t);
    // QKV's bias (qkv_bias), the others' (bias), on the output's columns.
    if (j == 0 ? m.qkv_bias : m.bias) bias_columns[j] = w.n_local;
    work(l.name, "fwd GEMM", KernelClass::Gemm, fwd_gemm[j], 1, fwd_count);
    work(l.name, "bwd input-grad GEMM", KernelClass::Gemm, dgrad_gemm[j], 1, L);
    work(l.name, "bwd weight-grad GEMM", KernelClass::Gemm, wgrad_gemm[j], 1, L);
    mem(l.name, "grad accumulate (shard)", KernelClass::Accumulate,
        {w.shard * (b + 2 * grad_bytes) * accumulate_share, accumulate_share}, L);
  }

  // Attention: whole heads per Y rank, whole sequences per Z·D rank,
  // replicated over X. Causal flash attention skips the masked half. Its
  // width is A·d_h (H for a GPT block); grouped KV heads do not change it.
  const double ay = m.attention_width() / g.y;
  double attn_fwd = 0, attn_bwd = 0;
  if (m.attention == Attention::Flash) {
    // Backward is 5 tile products against forward's 2 where dQ is summed
    // with atomics (FlashAttention); the engine's reproducible backward
    // recomputes QKᵀ and dO·Vᵀ for dQ in a pass of its own (7), after a
    // kernel for dO·O: three launches.
    const bool engine = job.fusion == Fusion::Engine;
    attn_fwd = flash_attention_time(p, dt, 2.0 * mb * S * S * ay, S, m.head_size());
    attn_bwd = (engine ? 3.5 : 2.5) * attn_fwd;
    work("attention", "fwd (flash, causal)", KernelClass::Attention, attn_fwd, 1, fwd_count);
    work("attention", engine ? "bwd (dK, dV; then dQ)" : "bwd", KernelClass::Attention, attn_bwd, engine ? 3 : 1, L);
  } else {
    // Unfused (MODEL.md §10): QKᵀ and PV over the full S×S (the masked half
    // too), backward twice that; E = mb·(A/G_y)·S² scores, whose softmax
    // reads and writes them (2bE), its backward reads two and writes one
    // (3bE); dropout reads and writes them and writes a byte mask (2bE + E),
    // its backward the same.
    const double E = mb * (double(m.heads) / g.y) * S * S, drop = m.attention_dropout ? 2 * b * E + E : 0;
    const double gemm_fwd = attention_time(p, dt, 4.0 * mb * S * S * ay);
    // A batched GEMM each for QKᵀ and PV forward, four backward; softmax
    // (and dropout) one kernel each way.
    work("attention", "fwd QK^T and PV (unfused, full S×S)", KernelClass::Attention, gemm_fwd, 2, fwd_count);
    const double ew_fwd = mem("attention",
                              m.attention_dropout ? "fwd scores softmax + dropout (unfused)" : "fwd scores softmax (unfused)",
                              KernelClass::Attention, {2 * b * E + drop, 1.0 + m.attention_dropout}, fwd_count);
    work("attention", "bwd QK^T and PV (unfused)", KernelClass::Attention, 2 * gemm_fwd, 4, L);
    const double ew_bwd = mem("attention", "bwd softmax (unfused)", KernelClass::Attention,
                              {3 * b * E + drop, 1.0 + m.attention_dropout}, L);
    attn_fwd = gemm_fwd + ew_fwd;
    attn_bwd = 2 * gemm_fwd + ew_bwd;
    if (selective) {  // the core's forward again, in backward
      work("attention", "bwd recompute QK^T and PV (selective)", KernelClass::Attention, gemm_fwd, 2, L);
      attn_bwd += gemm_fwd + mem("attention", "bwd recompute softmax (selective)", KernelClass::Attention,
                                 {2 * b * E + drop, 1.0 + m.attention_dropout}, L);
    }
  }
  // Memory-bound kernels at the job's fusion level: norms and residuals on
  // [t, H/G_x] (replicated over Y), the activation on [t, F/G_y]
  // (replicated over X), RoPE on the local queries and keys, the biases on
  // each layer's output columns.
  const bool rms = m.norm == Norm::RmsNorm, swiglu = m.mlp == Mlp::SwiGlu;
  const double qk = m.positions == Positions::Rope ? double(m.heads + m.kv_head_count()) * m.head_size() / g.y : 0;
  BlockKernels bk = block_kernels(job.fusion, m, t, hx, g.x, fy, qk, bias_columns, whole, b);
  for (MemoryKernels* k : {&bk.norm_fwd, &bk.norm_bwd, &bk.residual_fwd, &bk.residual_bwd}) k->bytes *= ty / t;
  const char* norm = rms ? "rmsnorm" : "layernorm";
  const double ln_fwd = mem(norm, "fwd", KernelClass::Norm, bk.norm_fwd, 2 * fwd_count);
  const double ln_bwd = mem(norm, "bwd", KernelClass::Norm, bk.norm_bwd, 2 * L);
  const double res_fwd = mem("residual", "fwd add", KernelClass::Residual, bk.residual_fwd, 2 * fwd_count);
  const double res_bwd = mem("residual", "bwd add", KernelClass::Residual, bk.residual_bwd, 2 * L);
  const char* act = swiglu ? "swiglu" : "gelu";
  const double gelu_fwd = mem(act, "fwd", KernelClass::Activation, bk.act_fwd, fwd_count);
  const double gelu_bwd = mem(act, "bwd", KernelClass::Activation, bk.act_bwd, L);
  double rope_fwd = 0, rope_bwd = 0;
  if (qk > 0) {
    rope_fwd = mem("rope", "fwd rotate q, k", KernelClass::Rope, bk.rope_fwd, fwd_count);
    rope_bwd = mem("rope", "bwd rotate dq, dk", KernelClass::Rope, bk.rope_bwd, L);
  }
  // Per layer, a bias's share of the ones there are: by its columns.
  double columns = 0;
  for (double n : bias_columns) columns += n;
  std::array<double, kBlockLayers> bias_fwd{}, bias_bwd{};
  if (bk.bias_fwd.launches > 0) mem("biases", "fwd add", KernelClass::Bias, bk.bias_fwd, fwd_count);
  if (bk.bias_bwd.launches > 0) mem("biases", "bwd column sums", KernelClass::Bias, bk.bias_bwd, L);
  for (int j = 0; j < kBlockLayers; ++j) {
    if (bias_columns[j] == 0) continue;
    const double share = bias_columns[j] / columns;  // one launch each way where not in the GEMM
    if (!bk.bias_in_gemm[j]) bias_fwd[j] = elementwise_time(p, KernelClass::Bias, bk.bias_fwd.bytes * share, 1);
    if (bk.bias_bwd.launches > 0) bias_bwd[j] = elementwise_time(p, KernelClass::Bias, bk.bias_bwd.bytes * share, 1);
  }
  // Exact norms over a hidden split over X. LayerNorm: per-token sum, then
  // centred sum of squares, forward; one reduction of 2t backward. RMSNorm:
  // the sum of squares forward, one reduction of t backward.
  comm(norm, rms ? "fwd sum-of-squares all-reduce" : "fwd sum + centred sum-of-squares all-reduces", Axis::X,
       Coll::AllReduce, ty, kStatBytes, (rms ? 1 : 2) * 2 * fwd_count);
  comm(norm, "bwd statistics all-reduce", Axis::X, Coll::AllReduce, (rms ? 1 : 2) * ty, kStatBytes, 2 * L);

  // Windows: each layer's GEMMs and the element-wise work that follows it.
  plan.fwd_window = {fwd_gemm[0] + rope_fwd + attn_fwd, fwd_gemm[1] + res_fwd + ln_fwd, fwd_gemm[2] + gelu_fwd,
                     fwd_gemm[3] + res_fwd + ln_fwd};
  plan.bwd_window = {dgrad_gemm[0] + wgrad_gemm[0] + ln_bwd + res_bwd,
                     dgrad_gemm[1] + wgrad_gemm[1] + attn_bwd + rope_bwd, dgrad_gemm[2] + wgrad_gemm[2] + ln_bwd + res_bwd,
                     dgrad_gemm[3] + wgrad_gemm[3] + gelu_bwd};
  for (int j = 0; j < kBlockLayers; ++j) plan.fwd_window[j] += bias_fwd[j], plan.bwd_window[j] += bias_bwd[j];
  plan.wgrad_window = wgrad_gemm;
  plan.dgrad_window = dgrad_gemm;
  plan.fwd_gemm_window = fwd_gemm;

  // Embedding: a Vp/G_y × H/G_x block sharded over Z; rows outside this Y
  // block contribute zero, so the lookup is summed over Y. Tied to the LM
  // head (the same block layout), a stage holding both adds the lookup's
  // gradient to the head's before one reduction; with stages the first and
  // last each keep a copy and sum their gradients once a step, priced as an
  // all-reduce over the pipeline axis (an upper bound on that pair).
  const EdgeKernels edge = edge_kernels(job.fusion, m, t, hx, vy, b);
  const bool one_tied_copy = m.tied_embeddings && st.first && st.last;
  if (st.first) {
    LocalWeight emb = local_weight(LinearLayer{"embedding", H, Vp, false}, g);
    comm("embedding", "fwd weight all-gather", Axis::Z, Coll::AllGather, emb.gathered, b, 1);
    if (sp) {
      comm("embedding", "fwd lookup reduce-scatter (sequence parallel)", Axis::Y, Coll::ReduceScatter, t * hx, b, 1);
      // The output's gradient, out of the split region: every token's, for this Y rank's vocabulary rows.
      comm("embedding", "bwd output-grad all-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * hx, b, 1);
    } else {
      comm("embedding", "fwd lookup all-reduce", Axis::Y, Coll::AllReduce, t * hx, b, 1);
    }
    if (!one_tied_copy) {
      comm("embedding", "bwd weight-grad reduce-scatter", Axis::Z, Coll::ReduceScatter, emb.gathered, b, 1);
      comm("embedding", "weight-grad all-reduce", Axis::D, Coll::AllReduce, emb.shard, grad_bytes, 1, true);
    }
    if (m.tied_embeddings && !st.last)
      comm("embedding", "tied weight-grad all-reduce (first and last stage)", Axis::P, Coll::AllReduce, emb.shard,
           grad_bytes, 1, true);
    mem("embedding", m.positions == Positions::Learned ? "fwd lookup + positions" : "fwd lookup",
        KernelClass::Embedding, edge.embedding_fwd, 1);
    mem("embedding", "bwd scatter-add", KernelClass::Embedding, edge.embedding_bwd, 1);
    mem("embedding", "grad accumulate (shard)", KernelClass::Accumulate,
        {emb.shard * (b + 2 * grad_bytes) * accumulate_share, accumulate_share}, 1);
  }

  // Final LayerNorm, LM head (a normal layer H → Vp), cross-entropy with the
  // vocabulary split over Y. Not recomputed: the head's backward follows its forward.
  if (st.last) {
    const char* final_norm = rms ? "final_rmsnorm" : "final_layernorm";
    comm(final_norm, rms ? "fwd sum-of-squares all-reduce" : "fwd sum + centred sum-of-squares all-reduces", Axis::X,
         Coll::AllReduce, ty, kStatBytes, rms ? 1 : 2);
    comm(final_norm, "bwd statistics all-reduce", Axis::X, Coll::AllReduce, (rms ? 1 : 2) * ty, kStatBytes, 1);
    mem(final_norm, "fwd", KernelClass::Norm, bk.norm_fwd, 1);
    mem(final_norm, "bwd", KernelClass::Norm, bk.norm_bwd, 1);
    LinearLayer head = lm_head(m);
    LocalWeight hw = local_weight(head, g);
    comm("lm_head", "fwd weight all-gather", Axis::Z, Coll::AllGather, hw.gathered, b, 1);
    if (sp) comm("lm_head", "fwd input all-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * hw.k_local, b, 1);
    comm("lm_head", "fwd output all-reduce", Axis::X, Coll::AllReduce, t * hw.n_local, b, 1);
    comm("lm_head", "bwd weight all-gather", Axis::Z, Coll::AllGather, hw.gathered, b, 1);
    if (sp) {
      comm("lm_head", "bwd input-grad reduce-scatter (sequence parallel)", Axis::Y, Coll::ReduceScatter,
           t * hw.k_local, b, 1);
      comm("lm_head", "bwd input re-gather (sequence parallel)", Axis::Y, Coll::AllGather, t * hw.k_local, b, 1);
    } else {
      comm("lm_head", "bwd input-grad all-reduce", Axis::Y, Coll::AllReduce, t * hw.k_local, b, 1);
    }
    comm("lm_head", "bwd weight-grad reduce-scatter", Axis::Z, Coll::ReduceScatter, hw.gathered, b, 1);
    comm("lm_head", "weight-grad all-reduce", Axis::D, Coll::AllReduce, hw.shard, grad_bytes, 1, true);
    if (m.tied_embeddings && !st.first)
      comm("lm_head", "tied weight-grad all-reduce (first and last stage)", Axis::P, Coll::AllReduce, hw.shard,
           grad_bytes, 1, true);
    work("lm_head", "fwd GEMM", KernelClass::Gemm, gemm_time(p, dt, t, hw.n_local, hw.k_local), 1, 1);
    work("lm_head", "bwd input-grad GEMM", KernelClass::Gemm, gemm_time(p, dt, t, hw.k_local, hw.n_local), 1, 1);
    work("lm_head", "bwd weight-grad GEMM", KernelClass::Gemm, gemm_time(p, dt, hw.k_local, hw.n_local, t), 1, 1);
    mem("lm_head", one_tied_copy ? "grad accumulate (shard, tied)" : "grad accumulate (shard)",
        KernelClass::Accumulate, {hw.shard * (b + 2 * grad_bytes) * accumulate_share, accumulate_share}, 1);
    comm("cross_entropy", "fwd max all-reduce", Axis::Y, Coll::AllReduce, t, kStatBytes, 1);
    comm("cross_entropy", "fwd sum-exp + target-logit all-reduce", Axis::Y, Coll::AllReduce, 2 * t, kStatBytes, 1);
    mem("cross_entropy", "fwd softmax (fp32)", KernelClass::CrossEntropy, edge.loss_fwd, 1);
    mem("cross_entropy", "bwd softmax gradient (fp32)", KernelClass::CrossEntropy, edge.loss_bwd, 1);
  }

  // Once per iteration: replicated parameters' gradients over Z, then D; the
  // optimizer on every local parameter.
  LocalParams lp = local_params(m, g, st);
  // Sequence parallel: each Y rank's norm weights saw only its tokens, so
  // their gradients are summed over Y once a step (Megatron's all-reduce of
  // the sequence-parallel LayerNorm gradients).
  if (sp)
    comm("replicated", "norm grad all-reduce (sequence parallel)", Axis::Y, Coll::AllReduce,
         (2 * L + (st.last ? 1 : 0)) * (rms ? 1 : 2) * hx, grad_bytes, 1, true);
  comm("replicated", "grad all-reduce (biases, norms, positions)", Axis::Z, Coll::AllReduce, lp.replicated,
       grad_bytes, 1, true);
  comm("replicated", "grad all-reduce (biases, norms, positions)", Axis::D, Coll::AllReduce, lp.replicated,
       grad_bytes, 1, true);
  // Master, m, v read and written, the gradient read and zeroed, the bf16 copy.
  // One multi-tensor kernel; the engine's launches are the norm's squares
  // over every part and their sum, then AdamW on the sharded arena and on
  // the replicated one (one per ODP bucket of the arena: not counted here).
  const double adam_bytes = 24 + 2 * grad_bytes + (low_precision(dt) ? 2 : 0);
  mem("optimizer", "AdamW step + clipping", KernelClass::Optimizer,
      {(lp.sharded + lp.replicated) * adam_bytes, job.fusion == Fusion::Engine ? 4.0 : 1.0}, 1, true);
  const double params = lp.sharded + lp.replicated;
  plan.host_copy_bytes = params * offload_host_bytes(dt);
  plan.host_bw = p.has_host ? p.host_bw_per_gpu() : 0;
  // ODP's buckets: Megatron-Core's default with its kernels (max(40 M, 1 M ·
  // G_d) parameters, so that large data axes stay bandwidth-bound), else the
  // profile's (PyTorch DDP's 25 MiB; what the engine runs).
  plan.dp_bucket_bytes = job.fusion == Fusion::Fused ? std::max(40e6, 1e6 * g.d) * grad_bytes : p.dp_bucket_bytes;
  plan.overlap_param_gather = job.fusion == Fusion::Fused;
  plan.dp_bytes = 0;
  for (const CommTerm& c : plan.comm)
    if (c.axis == Axis::D && c.per_step) plan.dp_bytes += c.bytes() * c.count;
  plan.offload_buckets = std::max(1.0, std::ceil(params / kOffloadBucket));
  plan.offload_chunks = std::max(1.0, std::ceil(plan.offload_buckets / kOffloadChunk));

  // The host issues every kernel, at least launch_s apart: where a
  // micro-step's forward or backward is shorter than its launches take, the
  // device waits for the host (MODEL.md §2, "Kernels").
  double busy[2] = {0, 0}, issued[2] = {0, 0};
  for (const auto& c : plan.compute)
    if (!c.per_step) busy[c.bwd] += c.seconds * c.count, issued[c.bwd] += c.launches * c.count * p.launch_s;
  if (issued[0] > busy[0]) work("host", "fwd launch-bound wait", KernelClass::LaunchBound, issued[0] - busy[0], 0, 1);
  if (issued[1] > busy[1]) work("host", "bwd launch-bound wait", KernelClass::LaunchBound, issued[1] - busy[1], 0, 1);

  plan.compute_s = plan.compute_fwd_s = plan.compute_bwd_s = plan.compute_step_s = plan.launches = 0;
  for (const auto& c : plan.compute) {
    plan.compute_s += c.seconds * per_iteration(plan, c);
    plan.launches += c.launches * per_iteration(plan, c);
    (c.per_step ? plan.compute_step_s : c.bwd ? plan.compute_bwd_s : plan.compute_fwd_s) += c.seconds * c.count;
  }
  plan.model_flops = model_flops(m, double(job.batch));
  double block_fwd_flops = 2.0 * job.batch * S * L * (m.block_matmul_params() + 2 * S * m.attention_width());
  const double core_flops = 4.0 * job.batch * S * S * L * m.attention_width();
  plan.hardware_flops = plan.model_flops + (full ? block_fwd_flops : selective ? core_flops : 0);
  plan.peak_flops_all = double(g.total()) * p.peak_flops(dt);
}

void term_times(const Plan& plan, const PerAxis<AxisLink>& links, double* times) {
  const size_t n = plan.comm.size();
  for (size_t i = 0; i < n; ++i) {
    const CommTerm& c = plan.comm[i];
    const AxisLink& l = links[static_cast<int>(c.axis)];
    times[i] = collective_time(c.coll, c.bytes(), l);
    times[n + i] = c.hide != Hide::None && l.nonblocking_differs ? collective_time(c.coll, c.bytes(), l, true) : times[i];
  }
}

Estimate combine(const Plan& plan, const double* times, const Overlap& ov, double batch_tokens, double* hidden) {
  const double h = plan.overlap_efficiency;
  const size_t n = plan.comm.size();
  // issued_seconds, with its choice made once per kind of term rather than
  // per term: this is the search's innermost loop.
  std::array<const double*, kHideKinds> src;
  std::array<double, kHideKinds> mul;
  for (size_t k = 0; k < src.size(); ++k) {
    bool nb = issued_nonblocking(static_cast<Hide>(k), ov);
    src[k] = nb ? times + n : times;
    mul[k] = nb ? plan.nonblocking_slowdown : 1;
  }
  auto t = [&](size_t i) {
    const size_t k = static_cast<size_t>(plan.comm[i].hide);
    return src[k][i] * mul[k];
  };
  // Per slot: what each hidable collective costs once.
  std::array<double, kBlockLayers> ag_f{}, ag_b{}, ar_in{}, rs{}, sp_ag{}, sp_rs{}, tp_f{}, tp_b{};
  for (size_t i = 0; i < n; ++i) {
    const CommTerm& c = plan.comm[i];
    switch (c.hide) {
      case Hide::OagForward: ag_f[c.slot] = t(i); break;
      case Hide::OagBackward: ag_b[c.slot] = t(i); break;
      case Hide::Oar: ar_in[c.slot] = t(i); break;
      case Hide::Ors: rs[c.slot] = t(i); break;
      case Hide::SpGather: sp_ag[c.slot] = t(i); break;
      case Hide::SpReduceScatter: sp_rs[c.slot] = t(i); break;
      case Hide::TpForward: tp_f[c.slot] = t(i); break;
      case Hide::TpBackward: tp_b[c.slot] = t(i); break;
      case Hide::None: break;
    }
  }
  // Backward, per block, layers in the order fc2, fc1, attn_out, qkv. Layer
  // j's window first hosts its own input-grad all-reduce (OAR, under its
  // weight-grad GEMM), then the reduce-scatter of the layer before it in
  // backward order (ORS), then the all-gather of the layer after it (OAG).
  // Sequence parallelism's re-gather, first, under the input-gradient GEMM
  // it is issued ahead of (Megatron's order).
  // OTP pipelines sequence parallelism's Y collectives with the GEMM they
  // feed or drain: forward with the layer's forward GEMM, the output
  // gradient's all-gather with its input-gradient GEMM; OAG's prefetch gets
  // what is left of the forward window. A slot holds at most one of each kind
  // (a layer either gathers its input or scatters its output).
  std::array<double, kBlockLayers> hid_ag_f{}, hid_ag_b{}, hid_ar{}, hid_rs{}, hid_sp{}, room{};
  std::array<double, kBlockLayers> hid_sp_rs{}, hid_tp_f{}, hid_tp_b{}, room_f{};
  for (int j = 0; j < kBlockLayers; ++j) {
    hid_sp[j] = std::min(sp_ag[j], h * plan.dgrad_window[j]);
    hid_ar[j] = ov.oar ? std::min(ar_in[j], h * plan.wgrad_window[j]) : 0;
    hid_sp_rs[j] = ov.oar || ov.otp ? std::min(sp_rs[j], h * plan.wgrad_window[j]) : 0;
    hid_tp_b[j] = ov.otp ? std::min(tp_b[j], std::max(0.0, h * plan.dgrad_window[j] - hid_sp[j])) : 0;
    hid_tp_f[j] = ov.otp ? std::min(tp_f[j], h * plan.fwd_gemm_window[j]) : 0;
    room[j] = h * plan.bwd_window[j] - hid_ar[j] - hid_sp[j] - hid_sp_rs[j] - hid_tp_b[j];
    room_f[j] = h * plan.fwd_window[j] - hid_tp_f[j];
  }
  for (int j = 0; j < kBlockLayers; ++j) {
    if (!ov.ors) break;
    int host = prev_slot(j);
    hid_rs[j] = std::min(rs[j], room[host]);
    room[host] -= hid_rs[j];
  }
  for (int j = 0; j < kBlockLayers; ++j) {
    if (!ov.oag) break;
    int host = next_slot(j);
    hid_ag_b[j] = std::min(ag_b[j], room[host]);
    room[host] -= hid_ag_b[j];
    hid_ag_f[j] = std::min(ag_f[j], room_f[prev_slot(j)]);
  }

  Estimate e;
  e.compute_s = plan.compute_s;
  // A stage's operation starts cold: its first forward all-gather (qkv) and
  // first backward all-gather (fc2) have no earlier layer of the same
  // operation to hide under, once per micro-step (MODEL.md §9).
  const bool staged = plan.grid.p > 1;
  double exposed_total = 0, exposed_fwd = 0, exposed_bwd = 0, exposed_step = 0;
  double hidden_fwd = 0, hidden_bwd = 0;  // per micro-step
  for (size_t i = 0; i < n; ++i) {
    const CommTerm& c = plan.comm[i];
    double hid = 0;
    switch (c.hide) {
      case Hide::OagForward: hid = hid_ag_f[c.slot]; break;
      case Hide::OagBackward: hid = hid_ag_b[c.slot]; break;
      case Hide::Oar: hid = hid_ar[c.slot]; break;
      case Hide::Ors: hid = hid_rs[c.slot]; break;
      case Hide::SpGather: hid = hid_sp[c.slot]; break;
      case Hide::SpReduceScatter: hid = hid_sp_rs[c.slot]; break;
      case Hide::TpForward: hid = hid_tp_f[c.slot]; break;
      case Hide::TpBackward: hid = hid_tp_b[c.slot]; break;
      case Hide::None: break;
    }
    if (hidden) hidden[i] = hid;
    double reps = per_iteration(plan, c);
    int a = static_cast<int>(c.axis);
    e.comm_s[a] += reps * t(i);
    double exposed = reps * (t(i) - hid);
    double per_micro = c.count * (t(i) - hid);
    if (staged && hid > 0 && ((c.hide == Hide::OagForward && c.slot == 0) ||
                              (c.hide == Hide::OagBackward && c.slot == kBlockLayers - 1))) {
      exposed += double(plan.micro_steps) * hid;
      per_micro += hid;
    }
    e.exposed_comm_s[a] += exposed;
    e.contention_s += reps * hid * plan.compute_slowdown;
    (c.bwd ? hidden_bwd : hidden_fwd) += c.count * hid;
    exposed_total += exposed;
    if (c.per_step) exposed_step += exposed;
    else (c.bwd ? exposed_bwd : exposed_fwd) += per_micro;
  }
  // Compute under a hidden collective runs compute_slowdown slower: the
  // window stretches by that share of the time hidden under it.
  e.compute_s += e.contention_s;
  e.sync_s = plan.sync_s;
  e.time_s = e.compute_s + exposed_total + e.sync_s;
  e.fwd_s = plan.compute_fwd_s + exposed_fwd + hidden_fwd * plan.compute_slowdown;
  e.bwd_s = plan.compute_bwd_s + exposed_bwd + hidden_bwd * plan.compute_slowdown;
  e.step_s = plan.compute_step_s + exposed_step + e.sync_s;
  e.mfu = plan.model_flops / (e.time_s * plan.peak_flops_all);
  e.hfu = plan.hardware_flops / (e.time_s * plan.peak_flops_all);
  e.tokens_per_s = batch_tokens / e.time_s;
  return e;
}

bool crosses_switch_groups(const MachineProfile& p, const Config& c) {
  if (p.switch_groups.nodes_per_group <= 0) return false;
  for (const AxisLink& l : placement_links(p, c.grid, c.order))
    if (l.rings_per_uplink > 0) return true;
  return c.grid.p > 1 && pair_link(p, c.grid.total(), axis_stride(c.grid, c.order, Axis::P), c.grid.p).pairs_per_uplink > 0;
}

PerAxis<AxisLink> placement_links(const MachineProfile& p, const Grid& g, const Order& o, LinkCache* cache) {
  PerAxis<AxisLink> links;
  // A tensor axis' groups counted against their own stage's only (Stages).
  // Not the data axis': its reductions gather at the end of every stage's
  // step, where the stages' drains meet; the pipe axis spans the stages.
  const Stages stages{axis_stride(g, o, Axis::P), g.p};
  for (Axis a : kAxes) {
    const long long stride = axis_stride(g, o, a);
    const Stages s = a == Axis::X || a == Axis::Y || a == Axis::Z ? stages : Stages{};
    links[static_cast<int>(a)] = cache ? cache->get(stride, g.size(a), s) : axis_link(p, g.total(), stride, g.size(a), s);
  }
  return links;
}

PerAxis<double> bytes_per_step(const Plan& plan, bool sharded_optimizer) {
  PerAxis<double> b{};
  for (const CommTerm& t : plan.comm) {
    b[size_t(t.axis)] += per_iteration(plan, t) * t.bytes();
    if (sharded_optimizer && t.axis == Axis::D && t.per_step)
      b[size_t(t.axis)] += per_iteration(plan, t) * t.elements * dtype_bytes(plan.dtype);
  }
  return b;
}

}  // namespace ff
