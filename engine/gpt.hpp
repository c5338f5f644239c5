#pragma once
// A GPT-style decoder on the 4D grid, exactly as MODEL.md §1 lays it out: one
// rank's parameters, its share of one micro-step's forward and backward, the
// per-step reductions and AdamW. This is the schedule: it launches every
// computation as a kernel on the communicator's device and issues every
// collective, the same code on every backend. Templated on the training
// dtype T: fp32 or bf16 for runs, fp64 for the exactness tests. Master
// weights, gradient accumulators, Adam's moments and reduction statistics
// are in M = master_t<T> (fp32 for bf16, where the weights the GEMMs read
// are the masters rounded after each step; T itself otherwise); bf16 runs with
// bf16 gradients (`grads_in_t`, MODEL.md §13 "Gradient dtype") keep the
// accumulators in M storage holding bf16 values and reduce them as bf16.
// gpt.cpp holds
// the schedule; optimizer.cpp the optimizer step, the data-parallel gradient
// buckets, the sharded optimizer and offload's bucket pipeline.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "advisor/core/config.hpp"
#include "advisor/core/engine_args.hpp"
#include "advisor/core/model_spec.hpp"
#include "engine/adamw.hpp"
#include "engine/comm.hpp"
#include "engine/device_kernels.hpp"
#include "engine/params.hpp"
#include "engine/runtime/bf16.hpp"
#include "engine/runtime/huge_pages.hpp"

namespace ff::engine {

// The data-parallel gradient buckets under ODP (as the profile's
// overlap.dp_bucket_MiB prices them), and offload's optimizer buckets and
// all-reduce chunks (k buckets each; MODEL.md §9).
struct BucketSizes {
  double dp_bytes = kDefaultDpBucketMiB * 1048576;
  size_t offload_elements = size_t(kDefaultOffloadBucket);
  int offload_chunk = kDefaultOffloadChunk;
};

// Offload's host link over the steps so far (this rank).
struct OffloadStats {
  double copy_s = 0;      // m and v copied into and out of the bucket buffers
  double hidden_s = 0;    // of it, while the last all-reduce chunk was still in flight
  double copy_bytes = 0;  // each way
  long buckets = 0;
};

struct AdamW {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // matrices only; biases, LayerNorm and positions are not decayed
  double clip = 1.0;          // global gradient norm; 0: no clipping
};

// The model's arrays: large ones on huge pages (huge_pages.hpp).
template <typename T>
using Buffer = std::vector<T, HugePageAllocator<T>>;

template <typename T>
class Gpt {
 public:
  using M = master_t<T>;
  // `stage_layers`: each stage's blocks, pinned; empty: the advisor's partition.
  // `slots`: activation slots (micro-batches, or interleaved chunks of them,
  // in flight); 0: P, 1F1B's. `grads_in_t`: gradients in T where T ≠ M
  // (--grad-dtype bf16 with bf16 training).
  Gpt(Comm& comm, const ModelSpec& m, const Config& c, uint64_t seed, const BucketSizes& sizes = {},
      const std::vector<int>& stage_layers = {}, size_t slots = 0, bool grads_in_t = false);

  void zero_grad();
  // Forward and backward of one micro-step; `tokens` holds micro_batch
  // sequences of S + 1 tokens (inputs, then shifted targets). Gradients
  // accumulate scaled by `grad_scale` (1 / tokens per step). Returns the sum
  // of this rank's token losses (every X and Y rank holds the same sum).
  // On the last micro-step of a step (`last`), ODP reduces each bucket of
  // weight gradients over D as soon as its backward has produced it. One
  // stage (P = 1): forward, head and backward of slot 0.
  double micro_step(const int* tokens, M grad_scale, bool last = true);

  // A pipeline stage's operations (MODEL.md §9), each on a micro-batch's
  // activation slot (micro-batch i in slot i mod P: at most P are in flight).
  // forward: the first stage embeds `tokens`, the others start from
  // `received` (the previous stage's output); the last stage's output stays
  // for head(), the others' is output(slot). head (last stage, after its
  // forward): the loss and the gradient of the stage's output. backward: from
  // that gradient (last stage) or `received_grad`; the first stage ends with
  // the embedding's backward, the others with input_grad(slot).
  // Interleaved (`chunk` of layout().chunks): the chunk's blocks alone, the
  // embedding with chunk 0 of the first stage, the head after chunk v − 1 of
  // the last; that chunk's backward runs later in the schedule, from the
  // gradient keep_output_grad(slot) kept after head().
  void forward(int slot, const T* received, const int* tokens, int chunk = 0);
  double head(const int* tokens, M grad_scale, bool last_of_step);
  void backward(int slot, const T* received_grad, const int* tokens, bool last_of_step, int chunk = 0);
  void keep_output_grad(int slot);
  const T* output(int slot) const { return out_[size_t(slot)].data(); }
  const T* input_grad(int slot) const { return grad_out_[size_t(slot)].data(); }
  size_t message_elements() const { return size_t(ts_ * hx_); }
  // Before a step's pipeline operations: the order in which they will run
  // (true: forward; with the head and backward on the last stage), so
  // that weights gathered over Z follow one schedule (static order only).
  // Interleaved: each operation's chunk (`chunks`), the last stage's
  // backwards listed as operations of their own.
  void begin_step(const std::vector<bool>& forward_ops, const std::vector<int>& chunks = {});
  // After them: every weight used as scheduled, every reduction retired.
  void end_step();
  // Per-step reductions (replicated gradients over Z then D, shards over D:
  // all-reduced, or with a sharded optimizer reduce-scattered and the
  // updated weights all-gathered), clipping by the global norm, AdamW
  // (offloaded: through the bucket buffers, update_offloaded). Returns the
  // norm before clipping.
  double optimizer_step(const AdamW& opt);

  // Every parameter in canonical layout, summed onto rank 0 of the world
  // communicator (empty elsewhere): name → row-major values.
  std::vector<std::pair<std::string, std::vector<double>>> canonical_parameters();

  const ParamLayout& layout() const { return layout_; }
  size_t dp_buckets() const { return buckets_.size(); }
  // Whether attention runs in tiles (flash_attention.hpp): the model's
  // "attention": "flash" (its default), where the device runs it at this
  // head size; else the unfused kernels, which keep the S×S probabilities.
  bool flash() const { return flash_; }
  // This rank's values and gradient accumulators of one parameter (tests;
  // matrix gradients exist from the first micro_step on).
  T* matrix_values(int mi) { return &shard_w_[layout_.matrices[mi].offset]; }
  M* matrix_grads(int mi) { return &shard_g_[layout_.matrices[mi].offset]; }
  T* vector_values(int vi) { return vw(vi); }
  M* vector_grads(int vi) { return vg(vi); }
  GemmStats gemm_stats;
  OffloadStats offload_stats;

 private:
  struct BlockActs {
    Buffer<T> h_in, xhat1, a1, qkv, probs, att, h_mid, xhat2, a2, f, g;
    Buffer<M> rstd1, rstd2, lse;  // probs (unfused attention) or lse (flash)
  };
  static constexpr size_t kMaxInflight = 3;  // weight-gradient reduce-scatters in flight under ORS
  struct GradSlot {
    Buffer<T> full, part;
    bool busy = false;
    Comm::Ticket ticket = 0;
  };

  // The shard arena's data-parallel reduction in buckets, from its top down:
  // backward produces weight gradients in descending offset order (LM head,
  // last block to first, embedding), so each bucket is a contiguous range. A
  // tied head adds into the embedding (offset 0), or on the last of several
  // stages into its copy placed at offset 0: final only after the embedding's
  // backward, or the exchange in end_step.
  // Without ODP there is one (sharded, one per matrix). Sharded, rank d of D
  // owns part d of every bucket (part_begin), its Adam moments stored
  // compactly at `moment`.
  struct Bucket {
    size_t lo = 0, hi = 0;
    size_t own_lo = 0, own_hi = 0, moment = 0;
    Buffer<M> part;  // the reduced part before it is copied into place (sharded)
    Buffer<T> part_t;  // the same, as it comes off the wire with gradients in T
    Comm::Ticket ticket = 0;
  };
  void build_buckets();
  static double adamw_bytes(size_t n, const T* w);
  void update_offloaded(M* master, M* g, M* m, M* v, T* w, size_t n, const AdamWStep<M>& s);
  // `last`: the backward that produced it was the step's last through mi
  // (captured when a reduce-scatter over Z is posted: it may complete during
  // another chunk's backward).
  void gradient_done(int mi, bool last);
  void gradient_done(int mi) { gradient_done(mi, last_micro_); }
  void begin_backward(bool last_of_step);
  void post_ready_buckets();
  void post_bucket(Bucket& b);
  bool sharded() const { return c_.shard_optimizer && c_.grid.d > 1; }
  // Gradients in T (MODEL.md §13 "Gradient dtype"): the accumulators stay in
  // M storage, rounded to T after each accumulation (a GPU's accumulate would
  // store T directly: the rounding is not charged), and every per-step
  // reduction moves them as T through wire_, which mirrors the shard arena
  // and, after it, the replicated one. Widened back, they are what clipping
  // and AdamW read.
  bool grads_in_t_ = false;
  Buffer<T> wire_;
  T* rep_wire() { return &wire_[layout_.shard_total]; }
  void allocate_grads();
  void round_grads(M* g, T* scratch, size_t n);
  void round_matrix_grad(int mi);
  void round_vector_grads();

  void init_parameters(uint64_t seed);
  void size_acts(BlockActs& a, bool full, bool core);
  size_t probs_size() const;
  bool full_recompute() const { return c_.recompute == Recompute::Full; }
  // Selective recompute runs the attention core again in backward: unfused
  // attention's probabilities are what it drops; flash keeps only lse.
  bool recomputes_core() const { return c_.recompute == Recompute::Selective && !flash_; }
  // A block's S×S probabilities: its own, or (selective recompute) scratch_'s.
  T* probs_of(BlockActs& a) { return a.probs.empty() ? scratch_.probs.data() : a.probs.data(); }
  T* vw(int v) { return &rep_w_[layout_.vectors[v].offset]; }
  M* vg(int v) { return &rep_g_[layout_.vectors[v].offset]; }
  T* vw_or_null(int v) { return v < 0 ? nullptr : vw(v); }  // a parameter the model may not have
  M* vg_or_null(int v) { return v < 0 ? nullptr : vg(v); }

  // Weight all-gathers follow a fixed schedule, so under OAG the next one can
  // be prefetched while this one is in use: per micro-step, or per step of a
  // pipeline in its static order.
  void schedule_op(bool forward_op, int chunk = 0);
  const T* acquire(int mi);
  GradSlot& grad_slot();
  // `done`: the gradient is final once added (not the tied head's: the
  // embedding's own backward adds to it after).
  void submit_weight_grad(int mi, GradSlot& slot, bool done = true);
  bool tied_across_stages() const { return layout_.tied && c_.grid.p > 1; }
  void sum_tied_gradient();
  // The gradient norm's parts of the shard arena in [lo, hi) (the tied copy
  // left out: its gradient is the embedding's).
  void shard_parts(size_t lo, size_t hi, std::vector<Part<M>>& parts);
  static void add_part(std::vector<Part<M>>& parts, const M* x, size_t n);

  template <class Body>
  void gemm_kernel(double flops, double bytes, Body&& body);
  template <typename C>
  void gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb, M beta, C* Cp,
            int ldc);
  void linear_forward(int mi, const T* in, const T* bias, T* out, bool tied = false, T* act = nullptr);
  void linear_backward(int mi, const T* in, const T* dout, T* din, M* dbias, bool tied = false);
  void embedding_forward(const int* tokens, T* h0);
  void embedding_backward(const int* host_tokens, const T* dh0);
  void block_forward(int l, BlockActs& a, T* h_out);  // l: the stage's local block
  void block_backward(int l, BlockActs& a, T* dh);
  // The layers with reductions: their kernels and collectives (layers.hpp).
  // Sequence parallelism (MODEL.md §13): a normal layer's input all-gathered
  // over Y out of the split region into sp_in_ (returned; `in` itself
  // otherwise); the norms' weight gradients summed over Y once a step.
  bool sp() const { return c_.sequence_parallel; }
  const T* gathered_input(const T* in);
  std::vector<int> norm_vectors() const;  // ids of the norms' weights (γ, β) this rank holds
  void sum_norm_gradients();
  void norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd);
  void norm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, M* dbeta);
  void rope(T* qkv, bool inverse);
  double cross_entropy(M grad_scale);
  void attention_forward(BlockActs& a);
  void attention_backward(BlockActs& a);
  // An element-wise kernel moving `bytes` (what MODEL.md's compute model
  // charges for it, device.hpp).
  template <class Body>
  void elementwise(KernelClass cls, double bytes, Body&& body) {
    dev_.launch(Kernel{cls, 0, bytes}, body);
  }

  Comm& comm_;
  Device& dev_;
  std::unique_ptr<DeviceKernels<T>> k_;
  ModelSpec m_;
  Config c_;
  BucketSizes sizes_;
  ParamLayout layout_;
  // Per rank: tokens (of them ts_ in the norm and residual regions: t_/G_y
  // under sequence parallelism, else t_), hidden columns, FFN columns (and the MLP's input layer's:
  // 2·fy for SwiGLU's gate and up), vocabulary rows, query and KV heads, the
  // attention output's and QKV's columns.
  long t_, ts_, hx_, fy_, mlp_y_, vy_, heads_y_, kv_y_, head_dim_, att_y_, qkv_y_;
  bool flash_ = false;
  // The weights in T (what the GEMMs and kernels read) and, where T is not
  // M, their masters: for the parts this rank updates, stored as compactly as
  // the moments (the rounded initial weights at the first step).
  Buffer<T> shard_w_, rep_w_;
  Buffer<M> shard_g_, shard_m_, shard_v_, shard_master_;
  Buffer<M> rep_g_, rep_m_, rep_v_, rep_master_;
  static constexpr bool kMasterCopy = !std::is_same_v<T, M>;
  M* shard_master(size_t own_lo, size_t moment) {
    if constexpr (kMasterCopy) return &shard_master_[moment];
    else return &shard_w_[own_lo];
  }
  M* rep_master() {
    if constexpr (kMasterCopy) return rep_master_.data();
    else return &rep_w_[rep_lo_];
  }
  T* weight_copy(T* w) { return kMasterCopy ? w : nullptr; }  // adamw_update's w
  long adam_steps_ = 0;
  bool grads_zero_ = true;          // every gradient accumulator holds 0 (zero_grad can skip its pass)
  std::vector<bool> grad_first_;    // per matrix: no gradient accumulated into it since they were zero
  void set_grads_zero();

  std::vector<int> schedule_;
  size_t cursor_ = 0;
  long prefetch_pos_ = -1;
  Comm::Ticket prefetch_ticket_ = 0;
  Buffer<T> gather_buf_[2];
  std::vector<GradSlot> slots_;

  std::vector<std::vector<BlockActs>> acts_;  // [slot][local layer]; under full recompute only h_in is kept
  std::vector<Buffer<T>> out_, grad_out_;     // per slot: the stage's output and its input's gradient (P > 1)
  BlockActs scratch_;            // recompute's working set
  Buffer<T> h_final_, xhat_f_, a_f_, logits_, dlogits_;
  Buffer<M> rstd_f_;
  Buffer<M> emb_grad_;  // G_z > 1 and T ≠ M: the embedding's gradient block, summed in M before it is rounded
  Buffer<M> tied_received_;  // the other end's tied-embedding gradient (stages)
  Buffer<T> tied_received_t_;  // the same, with gradients in T
  Buffer<T> tmp_hx_, dresid_, dtmp_, dffn_, dffn2_, datt_, dqkv_;
  // Sequence parallel, [t_, hx_] each: a normal layer's gathered input; a
  // transposed layer's output before its reduce-scatter, or its output's
  // gathered gradient; the embedding's lookup and gathered gradient.
  Buffer<T> sp_in_, sp_full_;
  Buffer<M> sp_norm_g_;  // the norms' gradients, packed for their one all-reduce over Y
  std::vector<int> norm_ids_;  // norm_vectors(), found once
  Buffer<T> sp_norm_t_;  // the same, with gradients in T
  Buffer<int> targets_;
  int forward_slot_ = 0;  // the last forward's activation slot (the head's micro-batch)
  std::vector<Bucket> buckets_;
  size_t rep_lo_ = 0, rep_hi_ = 0;  // the replicated arena's part this rank updates (all of it unless sharded)
  Buffer<M> rep_part_;
  Buffer<T> rep_part_t_;  // with gradients in T
  // Offload's bucket buffers on the device, two sets: one bucket's moments
  // come in while the one before is updated and goes out (the host arena is
  // shard_m_/v_, rep_m_/v_). A set is refilled once its copy out is done.
  struct OffloadSlot {
    Buffer<M> m, v, master;  // master only where T ≠ M
    Device::Event in = 0, out = 0;
  };
  OffloadSlot offload_slots_[2];
  size_t offload_next_ = 0;  // the set the next bucket uses
  Device::Event offload_copy(M* const arena[3], size_t lo, OffloadSlot& sl, size_t k, CopyWay way,
                             Device::Event after, Comm::Ticket last_chunk);
  size_t next_bucket_ = 0;
  size_t final_lo_ = 0;  // on the last micro-step, every matrix gradient at offsets >= this is final
  bool last_micro_ = false;
  Buffer<M> ln_sum_, ln_mean_, ln_sq_, ln_grad_stat_, ce_max_, ce_stat_;  // per-token statistics
};

}  // namespace ff::engine
