#include "engine/gpt.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include "engine/init_normal.hpp"
#include "engine/layers.hpp"
#include "engine/rng.hpp"
#include "engine/runtime/clock.hpp"

namespace ff::engine {

template <typename T>
Gpt<T>::Gpt(Comm& comm, const ModelSpec& m, const Config& c, uint64_t seed, const BucketSizes& sizes,
            const std::vector<int>& stage_layers, size_t slot_count, bool grads_in_t)
    : comm_(comm), dev_(comm.device()), k_(kernels_for<T>(comm.device())), m_(m), c_(c), sizes_(sizes),
      layout_(param_layout(m, c.grid, comm.coord(Axis::P), stage_layers, c.virtual_stages)) {
  const Grid& g = c.grid;
  grads_in_t_ = grads_in_t && kMasterCopy;
  t_ = long(c.micro_batch) * m.seq_len;
  ts_ = c.sequence_parallel ? t_ / g.y : t_;
  hx_ = m.hidden / g.x;
  fy_ = m.ffn / g.y;
  mlp_y_ = (m.mlp == Mlp::SwiGlu ? 2 : 1) * fy_;
  vy_ = m.padded_vocab / g.y;
  heads_y_ = m.heads / g.y;
  kv_y_ = m.kv_head_count() / g.y;
  head_dim_ = m.head_size();
  att_y_ = heads_y_ * head_dim_;
  qkv_y_ = (heads_y_ + 2 * kv_y_) * head_dim_;
  flash_ = m.attention == Attention::Flash && k_->runs_flash_attention(head_dim_);

  // Matrix gradients and moments are allocated on first use, as llm.c does:
  // start-up touches only the weights and what the forward pass needs.
  shard_w_.assign(layout_.shard_total, T(0));
  rep_w_.assign(layout_.vector_total, T(0));
  rep_g_.assign(layout_.vector_total, M(0));
  init_parameters(seed);
  set_grads_zero();

  if (g.z > 1)
    for (auto& b : gather_buf_) b.assign(layout_.largest_block, T(0));
  const size_t slots = slot_count ? slot_count : size_t(g.p);
  acts_.assign(slots, std::vector<BlockActs>(layout_.blocks.size() / size_t(layout_.chunks)));  // one chunk's
  // Full recompute keeps each block's input (and recomputes the rest into
  // scratch_); selective all but unfused attention's S×S probabilities, one
  // block's of which scratch_ holds while its attention core is recomputed.
  for (auto& slot : acts_)
    for (auto& a : slot) size_acts(a, !full_recompute(), !recomputes_core());
  if (c.recompute == Recompute::Full) size_acts(scratch_, true, true);
  if (recomputes_core()) scratch_.probs.assign(probs_size(), T(0));
  if (g.p > 1) {
    out_.assign(slots, Buffer<T>(size_t(ts_ * hx_), T(0)));
    grad_out_.assign(slots, Buffer<T>(size_t(ts_ * hx_), T(0)));
  }
  for (auto* v : {&h_final_, &xhat_f_, &a_f_, &tmp_hx_, &dresid_, &dtmp_}) v->assign(ts_ * hx_, T(0));
  if (sp()) {
    sp_in_.assign(t_ * hx_, T(0));
    sp_full_.assign(t_ * hx_, T(0));
    norm_ids_ = norm_vectors();
    size_t norms = 0;
    for (int v : norm_ids_) norms += layout_.vectors[size_t(v)].n;
    sp_norm_g_.assign(norms, M(0));
    if (grads_in_t_) sp_norm_t_.assign(norms, T(0));
  }
  rstd_f_.assign(ts_, M(0));
  logits_.assign(t_ * vy_, T(0));
  dlogits_.assign(t_ * vy_, T(0));
  dffn_.assign(t_ * fy_, T(0));
  dffn2_.assign(t_ * mlp_y_, T(0));
  datt_.assign(t_ * att_y_, T(0));
  dqkv_.assign(t_ * qkv_y_, T(0));
  targets_.assign(t_, 0);
  for (auto* v : {&ln_sum_, &ln_mean_, &ln_sq_, &ce_max_}) v->assign(t_, M(0));
  for (auto* v : {&ln_grad_stat_, &ce_stat_}) v->assign(2 * t_, M(0));
  if (tied_across_stages() && (layout_.first || layout_.last))
    tied_received_.assign(layout_.matrices[size_t(layout_.first ? layout_.embedding : layout_.tied_copy)].shard_n, M(0));
  if (grads_in_t_) tied_received_t_.assign(tied_received_.size(), T(0));
  if (kMasterCopy && g.z > 1 && layout_.first) emb_grad_.assign(layout_.matrices[layout_.embedding].block_n(), M(0));
  slots_.reserve(kMaxInflight);  // completion callbacks hold references into it
  build_buckets();
}

template <typename T>
size_t Gpt<T>::probs_size() const {
  return size_t(c_.micro_batch) * size_t(heads_y_) * size_t(m_.seq_len) * size_t(m_.seq_len);
}

template <typename T>
void Gpt<T>::size_acts(BlockActs& a, bool full, bool core) {
  a.h_in.assign(ts_ * hx_, T(0));
  if (!full) return;
  for (auto* v : {&a.xhat1, &a.a1, &a.h_mid, &a.xhat2, &a.a2}) v->assign(ts_ * hx_, T(0));
  a.rstd1.assign(ts_, M(0));
  a.rstd2.assign(ts_, M(0));
  a.qkv.assign(t_ * qkv_y_, T(0));
  if (core && flash_) a.lse.assign(size_t(c_.micro_batch * heads_y_ * m_.seq_len), M(0));
  else if (core) a.probs.assign(probs_size(), T(0));
  a.att.assign(t_ * att_y_, T(0));
  a.f.assign(t_ * mlp_y_, T(0));
  a.g.assign(t_ * fy_, T(0));
}

namespace {
// The cores this rank may run on (its affinity mask, which a launcher that
// binds narrows to the rank's own); 1 if unknown.
int rank_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}
}  // namespace

// Values depend on (seed, tensor, logical row, logical column) only. Matrices
// a row segment at a time: the tensor and row hashed once, the values by
// normal_row (fast in fp32, same values as normal_at). The segments are
// independent, so they are spread over the rank's cores (gpt-1.3b on one
// GPU: 1.3e9 values, 19 s on one core, most of the start-up).
template <typename T>
void Gpt<T>::init_parameters(uint64_t seed) {
  const Coords& co = comm_.coords();
  struct Segment {
    uint64_t row;
    const long* cols;
    size_t len;
    T* out;
    double stddev;
  };
  std::vector<std::vector<long>> cols(layout_.matrices.size());
  std::vector<Segment> segments;
  for (size_t mi = 0; mi < layout_.matrices.size(); ++mi) {
    const MatrixParam& p = layout_.matrices[mi];
    long row0;
    block_origin(p, co, row0, cols[mi]);
    const uint64_t tensor = tensor_key(seed, uint64_t(p.id));
    const size_t bc = size_t(p.block_cols), f0 = size_t(co[int(Axis::Z)]) * p.shard_n;
    for (size_t i = 0; i < p.shard_n;) {  // the shard may start and end inside a row
      const size_t f = f0 + i, lc = f % bc, len = std::min(bc - lc, p.shard_n - i);
      segments.push_back({row_key(tensor, uint64_t(row0 + long(f / bc))), &cols[mi][lc], len,
                          &shard_w_[p.offset + i], p.init_std});
      i += len;
    }
  }
  constexpr size_t kBatch = 64;  // segments a thread takes at a time
  std::atomic<size_t> next{0};
  auto fill = [&] {
    for (size_t lo; (lo = next.fetch_add(kBatch)) < segments.size();)
      for (size_t i = lo; i < std::min(segments.size(), lo + kBatch); ++i) {
        const Segment& g = segments[i];
        normal_row(g.row, g.cols, g.len, g.stddev, g.out);
      }
  };
  std::vector<std::thread> helpers;
  const size_t threads = std::min<size_t>(size_t(rank_cores()), segments.size() / kBatch + 1);
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(fill);
  fill();
  for (std::thread& h : helpers) h.join();
  for (const VectorParam& p : layout_.vectors)
    for (size_t i = 0; i < p.n; ++i) {
      long r, col;
      vector_element(p, co, i, r, col);
      double v = p.init == VectorParam::Init::One    ? 1.0
                 : p.init == VectorParam::Init::Zero ? 0.0
                                                     : p.init_std * normal_at(seed, uint64_t(p.id), uint64_t(r),
                                                                              uint64_t(col));
      rep_w_[p.offset + i] = T(v);
    }
}

template <typename T>
void Gpt<T>::schedule_op(bool forward_op, int chunk) {
  // The chunk's blocks, [first, last), in place (no copy per operation).
  const size_t n = layout_.blocks.size() / size_t(layout_.chunks);
  const auto first = layout_.blocks.begin() + long(size_t(chunk) * n), last = first + long(n);
  if (forward_op) {
    if (layout_.first && chunk == 0) schedule_.push_back(layout_.embedding);
    for (auto b = first; b != last; ++b)
      for (int mi : {b->qkv, b->out, b->fc1, b->fc2}) schedule_.push_back(mi);
    if (layout_.last && chunk == layout_.chunks - 1) {
      schedule_.push_back(layout_.lm_head);
      schedule_.push_back(layout_.lm_head);  // the head's backward re-gathers
    }
    return;
  }
  for (auto b = last; b-- != first;) {
    if (full_recompute())
      for (int mi : {b->qkv, b->out, b->fc1, b->fc2}) schedule_.push_back(mi);
    for (int mi : {b->fc2, b->fc1, b->out, b->qkv}) schedule_.push_back(mi);
  }
  // The embedding's backward scatters into its block: no gather.
}

template <typename T>
void Gpt<T>::begin_step(const std::vector<bool>& forward_ops, const std::vector<int>& chunks) {
  // Interleaved, the chunks' last backwards finish their gradients one after
  // another, in descending arena order: ODP's buckets are tracked over the
  // step, not one backward.
  last_micro_ = false;
  final_lo_ = layout_.shard_total;
  next_bucket_ = 0;
  schedule_.clear();
  cursor_ = 0;
  if (c_.grid.z == 1) return;  // nothing is gathered: acquire() keeps no schedule
  for (size_t k = 0; k < forward_ops.size(); ++k) {
    const bool f = forward_ops[k];
    schedule_op(f, chunks.empty() ? 0 : chunks[k]);
    if (f && layout_.last && chunks.empty()) schedule_op(false);  // the last stage's backward follows its forward
  }
}

template <typename T>
void Gpt<T>::end_step() {
  comm_.wait_all();
  if (tied_across_stages() && (layout_.first || layout_.last)) sum_tied_gradient();  // after the step's last backward
  post_ready_buckets();  // what the last reduce-scatters over Z completed
  if (c_.grid.z > 1 && cursor_ != schedule_.size()) throw std::logic_error("engine: weight schedule not consumed");
}

// Tied embeddings over stages: the first stage's embedding gradient and the
// last stage's (its copy's, from the head) exchanged and added, before either
// is reduced over D. a + b on one rank and b + a on the other: the same sum,
// so the two copies stay equal through AdamW. A two-rank all-reduce on the
// pipe axis (Megatron's embedding group), as MODEL.md §12 prices it.
template <typename T>
void Gpt<T>::sum_tied_gradient() {
  const int mi = layout_.first ? layout_.embedding : layout_.tied_copy;
  const MatrixParam& p = layout_.matrices[size_t(mi)];
  const int peer = layout_.first ? c_.grid.p - 1 : 0;
  // Every stage message of the step is done (end_step): any tag within MPI's
  // guaranteed 32767 matches this one alone. Both ends issue first the
  // first-to-last message, then the reply, so operations on NCCL's lanes
  // run in one order on both ranks.
  constexpr int kTiedTag = 32767;
  M* g = &shard_g_[p.offset];
  // Gradients in T: sent as T from their wire copy, the sum in M rounded once.
  T* gt = grads_in_t_ ? &wire_[p.offset] : nullptr;
  if (gt) elementwise(KernelClass::Copy, 0, [&] { k_->narrow(g, gt, p.shard_n); });
  auto exchange = [&](const auto* mine, auto* theirs) {
    Comm::Ticket recv = 0, send = 0;
    if (layout_.first) {
      send = comm_.isend(Axis::P, peer, mine, p.shard_n, kTiedTag);
      recv = comm_.irecv(Axis::P, peer, theirs, p.shard_n, kTiedTag);
    } else {
      recv = comm_.irecv(Axis::P, peer, theirs, p.shard_n, kTiedTag);
      send = comm_.isend(Axis::P, peer, mine, p.shard_n, kTiedTag);
    }
    comm_.wait_one(recv);
    comm_.wait_one(send);
  };
  if (gt) {
    exchange(static_cast<const T*>(gt), tied_received_t_.data());
    elementwise(KernelClass::Accumulate, double(p.shard_n) * (2.0 * sizeof(M) + sizeof(T)),
                [&] { k_->accumulate(g, tied_received_t_.data(), p.shard_n); });
    round_matrix_grad(mi);
  } else {
    exchange(static_cast<const M*>(g), tied_received_.data());
    elementwise(KernelClass::Accumulate, 3.0 * double(p.shard_n) * sizeof(M), [&] { k_->accumulate_master(g, tied_received_.data(), p.shard_n); });
  }
  gradient_done(mi);
}

template <typename T>
const T* Gpt<T>::acquire(int mi) {
  if (c_.grid.z == 1) return &shard_w_[layout_.matrices[size_t(mi)].offset];  // nothing to gather
  if (cursor_ >= schedule_.size() || schedule_[cursor_] != mi)
    throw std::logic_error("engine: weight " + layout_.matrices[mi].name + " used out of schedule");
  const MatrixParam& p = layout_.matrices[mi];
  const size_t pos = cursor_++;
  T* buf = gather_buf_[pos % 2].data();
  if (prefetch_pos_ == long(pos)) {
    comm_.wait(prefetch_ticket_);
    prefetch_pos_ = -1;
  } else {
    comm_.all_gather(Axis::Z, &shard_w_[p.offset], buf, p.shard_n);
  }
  // The other buffer held the previous weight, whose use is over where
  // kernels complete when launched; weights change only in the optimizer
  // step, so the prefetch waits for no kernel. On a deferred device (a GPU)
  // the kernels reading that buffer may still be queued: it waits for them.
  const Source prefetch_source = dev_.deferred() ? Source::Device : Source::Host;
  if (c_.overlap.oag && cursor_ < schedule_.size()) {
    const MatrixParam& q = layout_.matrices[schedule_[cursor_]];
    prefetch_ticket_ = comm_.iall_gather(Axis::Z, &shard_w_[q.offset], gather_buf_[cursor_ % 2].data(), q.shard_n,
                                         prefetch_source);
    prefetch_pos_ = long(cursor_);
  }
  return buf;
}

template <typename T>
typename Gpt<T>::GradSlot& Gpt<T>::grad_slot() {
  for (;;) {
    for (GradSlot& s : slots_)
      if (!s.busy) {
        s.busy = true;
        return s;
      }
    if (slots_.size() < kMaxInflight) {
      slots_.emplace_back();
      GradSlot& s = slots_.back();
      s.full.assign(layout_.largest_block, T(0));
      s.part.assign(layout_.largest_block / c_.grid.z, T(0));
      s.busy = true;
      return s;
    }
    Comm::Ticket oldest = 0;
    for (GradSlot& s : slots_)
      if (s.ticket && (!oldest || s.ticket < oldest)) oldest = s.ticket;
    comm_.wait(oldest);
  }
}

// The cell's full weight gradient → reduce-scatter over Z → added into this
// rank's shard accumulator. Under ORS it completes later, in posting order.
// The first gradient of a step goes straight into the accumulator (it holds
// zeros: nothing to add to), saving a pass over the shard, where the
// accumulator is in T; in M (bf16's fp32) every part is added in.
// (With G_z = 1 the gradients go straight into the accumulator: no slot.)
template <typename T>
void Gpt<T>::submit_weight_grad(int mi, GradSlot& slot, bool done) {
  const MatrixParam& p = layout_.matrices[mi];
  M* acc = &shard_g_[p.offset];
  const bool first = grad_first_[size_t(mi)] && !kMasterCopy;
  grad_first_[size_t(mi)] = false;
  T* dest = slot.part.data();
  if constexpr (!kMasterCopy)
    if (first) dest = acc;
  auto accumulate = [this, mi, acc, &slot, first, done, last = last_micro_, n = p.shard_n]() {
    if (!first)
      elementwise(KernelClass::Accumulate, n * (2.0 * sizeof(M) + sizeof(T)), [&] { k_->accumulate(acc, slot.part.data(), n); });
    if (grads_in_t_) round_matrix_grad(mi);
    if (done) gradient_done(mi, last);
    slot.busy = false;
    slot.ticket = 0;
  };
  if (c_.overlap.ors) {
    slot.ticket = comm_.ireduce_scatter(Axis::Z, slot.full.data(), dest, p.shard_n, accumulate);
  } else {
    comm_.reduce_scatter(Axis::Z, slot.full.data(), dest, p.shard_n);
    accumulate();
  }
}

// A GEMM of `flops` (moving `bytes` besides) as one kernel, timed into
// gemm_stats: on the cpu the host's BLAS time (what `body` returns),
// elsewhere the device's.
template <typename T>
template <class Body>
void Gpt<T>::gemm_kernel(double flops, double bytes, Body&& body) {
  double blas_s = 0;
  const double device_s = dev_.launch(Kernel{KernelClass::Gemm, flops, bytes}, [&] { blas_s = body(); });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += flops;
}

// C = alpha·op(A)·op(B) + beta·C.
template <typename T>
template <typename C>
void Gpt<T>::gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb, M beta,
                  C* Cp, int ldc) {
  if (m == 0 || n == 0) return;
  gemm_kernel(2.0 * m * n * k, 0, [&] {
    if constexpr (std::is_same_v<C, T>) return k_->gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc);
    else return k_->gemm_to_master(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc);
  });
}

// out[t, n] = in[t, k] · W[k, n], partial sums reduced over X (normal layer)
// or Y (transposed), then the bias; with `act`, act = gelu(out) (out kept
// for GELU's backward). The tied head (`tied`) reads the embedding's block
// [n, k] transposed, and reduces as a normal layer.
//
// Where the output's axis has one rank nothing is reduced: the bias, and
// GELU, go into the GEMM's epilogue, one kernel (a GPU's cuBLASLt), which
// writes act besides out. The advisor's engine level counts the same
// (advisor/model/kernel_inventory.cpp).
//
// Sequence parallel: a normal layer's input is all-gathered over Y first; a
// transposed layer's output is reduce-scattered over Y into the split region
// (`out` holds ts_ rows) and its bias added there.
template <typename T>
void Gpt<T>::linear_forward(int mi, const T* in, const T* bias, T* out, bool tied, T* act) {
  const MatrixParam& p = layout_.matrices[mi];
  const bool transposed = p.transposed && !tied;
  if (sp() && !transposed) in = gathered_input(in);
  const T* W = acquire(mi);
  const int k = int(tied ? p.block_cols : p.block_rows), n = int(tied ? p.block_rows : p.block_cols);
  const int ldw = tied ? k : n;
  // (Sequence parallelism splits over Y > 1: a transposed layer's is never whole.)
  if (bias && comm_.size(transposed ? Axis::Y : Axis::X) == 1) {
    const int t = int(t_);
    gemm_kernel(2.0 * t * n * k, act ? double(t) * n * sizeof(T) : 0, [&] {
      return act ? k_->gemm_bias_gelu(false, tied, t, n, k, M(1), in, k, W, ldw, bias, out, act)
                 : k_->gemm_bias(false, tied, t, n, k, M(1), in, k, W, ldw, bias, out);
    });
    return;
  }
  long rows = t_;
  if (sp() && transposed) {
    gemm(false, false, int(t_), n, k, M(1), in, k, W, n, M(0), sp_full_.data(), n);
    comm_.reduce_scatter(Axis::Y, sp_full_.data(), out, size_t(ts_) * n);
    rows = ts_;
  } else {
    gemm(false, tied, int(t_), n, k, M(1), in, k, W, ldw, M(0), out, n);
    comm_.all_reduce(transposed ? Axis::Y : Axis::X, out, size_t(t_) * n);
  }
  if (bias)  // charged as the GEMM's epilogue it stands for: no traffic of its own
    elementwise(KernelClass::Bias, 0, [&] { k_->add_bias(out, bias, rows, n); });
  if (act)
    elementwise(KernelClass::Activation, 2.0 * rows * n * sizeof(T), [&] { k_->gelu_forward(out, act, rows * n); });
}

template <typename T>
std::vector<int> Gpt<T>::norm_vectors() const {
  std::vector<int> ids;
  for (const BlockParams& b : layout_.blocks)
    for (int v : {b.ln1_g, b.ln1_b, b.ln2_g, b.ln2_b}) ids.push_back(v);
  for (int v : {layout_.lnf_g, layout_.lnf_b}) ids.push_back(v);
  std::erase(ids, -1);  // RMSNorm's β; the final norm off the last stage
  return ids;
}

// Packed, one all-reduce over Y for all (Megatron sums the sequence-parallel
// norm gradients the same way). The packing is host bookkeeping here; the
// advisor prices the reduction alone.
template <typename T>
void Gpt<T>::sum_norm_gradients() {
  auto move = [&](bool pack) {
    elementwise(KernelClass::Copy, 0, [&] {
      size_t at = 0;
      for (int v : norm_ids_) {
        const VectorParam& p = layout_.vectors[size_t(v)];
        M* g = vg(v);
        if (grads_in_t_ && pack) k_->narrow(g, &sp_norm_t_[at], p.n);
        else if (grads_in_t_) k_->widen(&sp_norm_t_[at], g, p.n);
        else if (pack) k_->copy(g, &sp_norm_g_[at], p.n * sizeof(M));
        else k_->copy(&sp_norm_g_[at], g, p.n * sizeof(M));
        at += p.n;
      }
    });
  };
  move(true);
  if (grads_in_t_) comm_.all_reduce(Axis::Y, sp_norm_t_.data(), sp_norm_t_.size());
  else comm_.all_reduce(Axis::Y, sp_norm_g_.data(), sp_norm_g_.size());
  move(false);
}

template <typename T>
const T* Gpt<T>::gathered_input(const T* in) {
  comm_.all_gather(Axis::Y, in, sp_in_.data(), size_t(ts_ * hx_));
  return sp_in_.data();
}

// din = dout · Wᵀ (reduced over the input's other axis), dW = inᵀ · dout.
// Under OAR the din all-reduce runs while dW is computed. The tied head's
// gradient goes into the embedding's accumulator ([n, k]: dW = doutᵀ · in),
// which is final only after the embedding's own backward has added to it.
//
// Sequence parallel: a transposed layer's output gradient (ts_ rows) is
// all-gathered over Y first; a normal layer's input gradient is reduce-
// scattered over Y into the split region (`din` holds ts_ rows), and its
// input, kept split, gathered again for the weight gradient.
template <typename T>
void Gpt<T>::linear_backward(int mi, const T* in, const T* dout, T* din, M* dbias, bool tied) {
  const MatrixParam& p = layout_.matrices[mi];
  const bool transposed = p.transposed && !tied;
  const int k = int(tied ? p.block_cols : p.block_rows), n = int(tied ? p.block_rows : p.block_cols);
  if (sp() && transposed) {
    comm_.all_gather(Axis::Y, dout, sp_full_.data(), size_t(ts_) * n);
    dout = sp_full_.data();
  }
  if (dbias)  // column sums over the tokens: dout read once
    elementwise(KernelClass::Bias, double(t_) * n * sizeof(T), [&] { k_->bias_grad(dout, dbias, t_, n); });
  const T* W = acquire(mi);
  const Axis in_axis = transposed ? Axis::X : Axis::Y;
  Comm::Ticket oar = 0;
  if (sp() && !transposed) {
    // The re-gather goes first, under the input-gradient GEMM (Megatron's
    // order; MODEL.md §13).
    const Comm::Ticket regather = comm_.iall_gather(Axis::Y, in, sp_in_.data(), size_t(ts_ * hx_));
    gemm(false, !tied, int(t_), k, n, M(1), dout, n, W, tied ? k : n, M(0), sp_full_.data(), k);
    if (c_.overlap.oar)
      oar = comm_.ireduce_scatter(Axis::Y, sp_full_.data(), din, size_t(ts_) * k);
    else
      comm_.reduce_scatter(Axis::Y, sp_full_.data(), din, size_t(ts_) * k);
    comm_.wait(regather);
    in = sp_in_.data();
  } else {
    gemm(false, !tied, int(t_), k, n, M(1), dout, n, W, tied ? k : n, M(0), din, k);
    if (c_.overlap.oar)
      oar = comm_.iall_reduce(in_axis, din, size_t(t_) * k);
    else
      comm_.all_reduce(in_axis, din, size_t(t_) * k);
  }
  // The weight gradient: [k, n] = inᵀ · dout, or the tied head's [n, k] = doutᵀ · in.
  auto weight_grad = [&](M beta, auto* C) {
    if (tied) gemm(true, false, n, k, int(t_), M(1), dout, n, in, k, beta, C, k);
    else gemm(true, false, k, n, int(t_), M(1), in, k, dout, n, beta, C, n);
  };
  if (c_.grid.z == 1) {
    // The block is the shard: accumulate into it in the GEMM (β = 1; BLAS
    // reads and writes C once either way) instead of a full product in a
    // slot and a second pass adding it in.
    weight_grad(M(1), &shard_g_[p.offset]);
    if (grads_in_t_) round_matrix_grad(mi);
    if (!tied) gradient_done(mi);
  } else {
    GradSlot& slot = grad_slot();
    weight_grad(M(0), slot.full.data());
    submit_weight_grad(mi, slot, !tied);
  }
  comm_.wait(oar);
  post_ready_buckets();
}

// Sequence parallel: the lookup is reduce-scattered over Y, and this rank's
// ts_ tokens, from token y·ts_ of the micro-batch on, take their positions.
template <typename T>
void Gpt<T>::embedding_forward(const int* tokens, T* h0) {
  const MatrixParam& p = layout_.matrices[layout_.embedding];
  const T* E = acquire(layout_.embedding);
  const long S = m_.seq_len, v0 = long(comm_.coord(Axis::Y)) * vy_;
  T* lookup = sp() ? sp_full_.data() : h0;
  elementwise(KernelClass::Embedding, 2.0 * t_ * hx_ * sizeof(T), [&] { k_->embedding_lookup(tokens, E, p.block_cols, lookup, t_, S, hx_, vy_, v0); });
  if (sp()) comm_.reduce_scatter(Axis::Y, lookup, h0, size_t(ts_) * hx_);
  else comm_.all_reduce(Axis::Y, h0, size_t(t_) * hx_);
  if (layout_.positions < 0) return;  // rotary positions: applied to Q and K in each block
  const T* pos = vw(layout_.positions);
  // add_positions counts positions from 0: the tokens up to the next
  // sequence's start, then whole sequences from there.
  const long first = sp() ? (comm_.coord(Axis::Y) * ts_) % S : 0, head = std::min(ts_, (S - first) % S);
  elementwise(KernelClass::Embedding, double(ts_) * hx_ * sizeof(T), [&] {
    if (head > 0) k_->add_positions(h0, pos + first * hx_, head, S, hx_);
    if (ts_ > head) k_->add_positions(h0 + head * hx_, pos, ts_ - head, S, hx_);
  });
}

template <typename T>
void Gpt<T>::embedding_backward(const int* host_tokens, const T* dh0) {
  const MatrixParam& p = layout_.matrices[layout_.embedding];
  const long S = m_.seq_len, v0 = long(comm_.coord(Axis::Y)) * vy_;
  // Rows of tokens seen, added straight into the accumulator when the block
  // is the shard; otherwise into a zeroed block for the reduce-scatter (in
  // M, then rounded to T where they differ: a token's rows summed in bf16
  // would lose the small ones).
  GradSlot* slot = c_.grid.z == 1 ? nullptr : &grad_slot();
  M* dE = &shard_g_[p.offset];
  if (slot) {
    if constexpr (kMasterCopy) dE = emb_grad_.data();
    else dE = slot->full.data();
  }
  M* gpos = vg_or_null(layout_.positions);
  if (sp()) {  // every token's gradient, for this Y rank's vocabulary rows
    comm_.all_gather(Axis::Y, dh0, sp_full_.data(), size_t(ts_) * hx_);
    dh0 = sp_full_.data();
  }
  elementwise(KernelClass::Embedding, (gpos ? 3.0 : 2.0) * t_ * hx_ * sizeof(T), [&] {
    if (slot) k_->zero(dE, p.block_n() * sizeof(M));
    k_->embedding_scatter_add(host_tokens, dh0, dE, p.block_cols, gpos, t_, S, hx_, vy_, v0);
    if (slot && kMasterCopy) k_->narrow(dE, slot->full.data(), p.block_n());
  });
  if (!slot && grads_in_t_) round_matrix_grad(layout_.embedding);
  // With stages, a tied embedding's gradient is final once the last stage's
  // has been added (end_step).
  const bool done = !tied_across_stages();
  if (slot) submit_weight_grad(layout_.embedding, *slot, done);
  else if (done) gradient_done(layout_.embedding);
  post_ready_buckets();
}

// The norms' kernels move 2·t·hx (forward) and 3·t·hx (backward) values in
// all, MODEL.md's count: a GPU reads x once and keeps its statistics, however
// many passes the host makes. Split over X (hx < H), LayerNorm reduces twice
// over X forward (the sum, then the centred squares) and once (2t) backward;
// RMSNorm once (t) each way. On whole rows (G_x = 1, under sequence
// parallelism too: its ts_ tokens are whole rows) nothing is reduced between
// the steps: one kernel forward, one backward, whose dγ (dβ) is a second GPU
// kernel on the cuda device (the chunks' partial column sums added in order).
// `beta` and `dbeta` are LayerNorm's.
template <typename T>
void Gpt<T>::norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd) {
  const long H = m_.hidden;
  const double values = double(ts_) * hx_ * sizeof(T);
  const bool rms = m_.norm == Norm::RmsNorm;
  if (hx_ == H) {  // reads x, writes y and x̂ (the backward's input)
    elementwise(KernelClass::Norm, 3 * values, [&] {
      if (rms) k_->rmsnorm_forward(x, gamma, y, xhat, rstd, ts_, H);
      else k_->layernorm_forward(x, gamma, beta, y, xhat, rstd, ts_, H);
    });
    return;
  }
  if (rms) {
    elementwise(KernelClass::Norm, values, [&] { k_->rmsnorm_row_squares(x, ln_sq_.data(), ts_, hx_); });
    comm_.all_reduce(Axis::X, ln_sq_.data(), size_t(ts_));
    elementwise(KernelClass::Norm, values, [&] { k_->rmsnorm_normalize(x, ln_sq_.data(), gamma, y, xhat, rstd, ts_, hx_, H); });
    return;
  }
  elementwise(KernelClass::Norm, values, [&] { k_->layernorm_row_sums(x, ln_sum_.data(), ts_, hx_); });
  comm_.all_reduce(Axis::X, ln_sum_.data(), size_t(ts_));
  elementwise(KernelClass::Norm, 0, [&] { k_->layernorm_centred_squares(x, ln_sum_.data(), ln_mean_.data(), ln_sq_.data(), ts_, hx_, H); });
  comm_.all_reduce(Axis::X, ln_sq_.data(), size_t(ts_));
  elementwise(KernelClass::Norm, values, [&] {
    k_->layernorm_normalize(x, ln_mean_.data(), ln_sq_.data(), gamma, beta, y, xhat, rstd, ts_, hx_, H);
  });
}

template <typename T>
void Gpt<T>::norm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma, M* dbeta) {
  const long H = m_.hidden;
  const double values = double(ts_) * hx_ * sizeof(T);
  const bool rms = m_.norm == Norm::RmsNorm;
  if (hx_ == H) {
    dev_.launch(Kernel{KernelClass::Norm, 0, 3 * values, kFusedNormBackwardKernels}, [&] {
      if (rms) k_->rmsnorm_backward(dy, xhat, rstd, gamma, dx, dgamma, ts_, H);
      else k_->layernorm_backward(dy, xhat, rstd, gamma, dx, dgamma, dbeta, ts_, H);
    });
    return;
  }
  if (rms) {
    elementwise(KernelClass::Norm, values, [&] { k_->rmsnorm_backward_sums(dy, xhat, gamma, ln_grad_stat_.data(), ts_, hx_); });
    comm_.all_reduce(Axis::X, ln_grad_stat_.data(), size_t(ts_));
    elementwise(KernelClass::Norm, 2 * values, [&] {
      k_->rmsnorm_backward_apply(dy, xhat, rstd, gamma, ln_grad_stat_.data(), dx, dgamma, ts_, hx_, H);
    });
    return;
  }
  elementwise(KernelClass::Norm, values, [&] { k_->layernorm_backward_sums(dy, xhat, gamma, ln_grad_stat_.data(), ts_, hx_); });
  comm_.all_reduce(Axis::X, ln_grad_stat_.data(), size_t(2 * ts_));
  elementwise(KernelClass::Norm, 2 * values, [&] {
    k_->layernorm_backward_apply(dy, xhat, rstd, gamma, ln_grad_stat_.data(), dx, dgamma, dbeta, ts_, hx_, H);
  });
}

// Softmax traffic as MODEL.md counts it: 2·t·vy values forward, 2·t·vy
// backward, in M (fp32 for bf16).
template <typename T>
double Gpt<T>::cross_entropy(M grad_scale) {
  const long v0 = long(comm_.coord(Axis::Y)) * vy_, valid = vocab_valid(vy_, v0, long(m_.vocab));
  const double values = 2.0 * t_ * vy_ * sizeof(M);
  elementwise(KernelClass::CrossEntropy, 0, [&] { k_->cross_entropy_row_max(logits_.data(), ce_max_.data(), t_, vy_, valid); });
  comm_.all_reduce(Axis::Y, ce_max_.data(), size_t(t_), ReduceOp::Max);
  elementwise(KernelClass::CrossEntropy, values, [&] {
    k_->cross_entropy_exp_sums(logits_.data(), targets_.data(), ce_max_.data(), dlogits_.data(), ce_stat_.data(), t_,
                               vy_, v0, valid);
  });
  comm_.all_reduce(Axis::Y, ce_stat_.data(), size_t(2 * t_));
  double loss = 0;
  elementwise(KernelClass::CrossEntropy, values, [&] {
    loss = k_->cross_entropy_finish(targets_.data(), ce_max_.data(), ce_stat_.data(), dlogits_.data(), t_, vy_, v0,
                                    valid, grad_scale);
  });
  return loss;
}

// Attention is one kernel each way, as fused kernels are on a GPU.
// Unfused: QKᵀ and PV over the full S×S (4·S²·dh FLOPs per head and
// sequence), backward twice that; the softmax reads and writes the E =
// seqs·heads·S² scores (2E values), its backward reads two and writes one
// (3E): MODEL.md's unfused attention. Flash: the causal half, 2·S²·dh
// forward, and backward's seven tile products against forward's two (its
// dQ pass recomputes QKᵀ and dO·Vᵀ rather than add with atomics), priced
// compute-bound as MODEL.md prices flash attention.
template <typename T>
void Gpt<T>::attention_forward(BlockActs& a) {
  const long seqs = c_.micro_batch, S = m_.seq_len;
  const double scores = double(seqs) * heads_y_ * S * S;
  const Kernel k = flash_ ? Kernel{KernelClass::Attention, 2.0 * scores * head_dim_, 0}
                          : Kernel{KernelClass::Attention, 4.0 * scores * head_dim_, 2 * scores * sizeof(T), 3};
  double blas_s = 0;
  const double device_s = dev_.launch(k, [&] {
    blas_s = flash_ ? k_->flash_attention_forward(a.qkv.data(), a.att.data(), a.lse.data(), seqs, S, heads_y_, kv_y_,
                                                  head_dim_)
                    : k_->attention_forward(a.qkv.data(), a.att.data(), probs_of(a), seqs, S, heads_y_, kv_y_,
                                            head_dim_);
  });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += k.flops;
}

template <typename T>
void Gpt<T>::attention_backward(BlockActs& a) {
  const long seqs = c_.micro_batch, S = m_.seq_len;
  const double scores = double(seqs) * heads_y_ * S * S;
  const Kernel k = flash_ ? Kernel{KernelClass::Attention, 7.0 * scores * head_dim_, 0, 3}
                          : Kernel{KernelClass::Attention, 8.0 * scores * head_dim_, 3 * scores * sizeof(T), 5};
  double blas_s = 0;
  const double device_s = dev_.launch(k, [&] {
    blas_s = flash_ ? k_->flash_attention_backward(a.qkv.data(), a.att.data(), a.lse.data(), datt_.data(),
                                                   dqkv_.data(), seqs, S, heads_y_, kv_y_, head_dim_)
                    : k_->attention_backward(a.qkv.data(), probs_of(a), datt_.data(), dqkv_.data(), seqs, S,
                                             heads_y_, kv_y_, head_dim_);
  });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += k.flops;
}

// Rotary positions on this rank's query and key heads, in place: forward on
// QKV's output, backward (the inverse turn) on its gradient.
template <typename T>
void Gpt<T>::rope(T* qkv, bool inverse) {
  if (m_.positions != Positions::Rope) return;
  const double bytes = 2.0 * t_ * (heads_y_ + kv_y_) * head_dim_ * sizeof(T);
  elementwise(KernelClass::Rope, bytes, [&] { k_->rope_rotate(qkv, t_, m_.seq_len, heads_y_, kv_y_, head_dim_, inverse); });
}

template <typename T>
void Gpt<T>::block_forward(int l, BlockActs& a, T* h_out) {
  const BlockParams& b = layout_.blocks[l];
  const long n_hx = ts_ * hx_;
  const double residual = 3.0 * n_hx * sizeof(T);
  norm_forward(a.h_in.data(), vw(b.ln1_g), vw_or_null(b.ln1_b), a.a1.data(), a.xhat1.data(), a.rstd1.data());
  linear_forward(b.qkv, a.a1.data(), vw_or_null(b.qkv_b), a.qkv.data());
  rope(a.qkv.data(), false);
  attention_forward(a);
  linear_forward(b.out, a.att.data(), vw_or_null(b.out_b), tmp_hx_.data());
  elementwise(KernelClass::Residual, residual, [&] { k_->add(a.h_in.data(), tmp_hx_.data(), a.h_mid.data(), size_t(n_hx)); });
  norm_forward(a.h_mid.data(), vw(b.ln2_g), vw_or_null(b.ln2_b), a.a2.data(), a.xhat2.data(), a.rstd2.data());
  if (m_.mlp == Mlp::SwiGlu) {
    linear_forward(b.fc1, a.a2.data(), vw_or_null(b.fc1_b), a.f.data());
    elementwise(KernelClass::Activation, 3.0 * t_ * fy_ * sizeof(T), [&] { k_->swiglu_forward(a.f.data(), a.g.data(), t_, fy_); });
  } else {
    linear_forward(b.fc1, a.a2.data(), vw_or_null(b.fc1_b), a.f.data(), false, a.g.data());
  }
  linear_forward(b.fc2, a.g.data(), vw_or_null(b.fc2_b), tmp_hx_.data());
  elementwise(KernelClass::Residual, residual, [&] { k_->add(a.h_mid.data(), tmp_hx_.data(), h_out, size_t(n_hx)); });
}

// dh: the gradient of the block's output on entry, of its input on exit.
template <typename T>
void Gpt<T>::block_backward(int l, BlockActs& a, T* dh) {
  const BlockParams& b = layout_.blocks[l];
  const long n_hx = ts_ * hx_;
  const double residual = 3.0 * n_hx * sizeof(T);
  auto add_residual = [&] {
    elementwise(KernelClass::Residual, residual, [&] { k_->add(dh, dtmp_.data(), dh, size_t(n_hx)); });
  };
  linear_backward(b.fc2, a.g.data(), dh, dffn_.data(), vg_or_null(b.fc2_b));
  if (m_.mlp == Mlp::SwiGlu)
    elementwise(KernelClass::Activation, 5.0 * t_ * fy_ * sizeof(T), [&] { k_->swiglu_backward(a.f.data(), dffn_.data(), dffn2_.data(), t_, fy_); });
  else
    elementwise(KernelClass::Activation, 3.0 * t_ * fy_ * sizeof(T),
                [&] { k_->gelu_backward(a.f.data(), dffn_.data(), dffn2_.data(), t_ * fy_); });
  linear_backward(b.fc1, a.a2.data(), dffn2_.data(), tmp_hx_.data(), vg_or_null(b.fc1_b));
  norm_backward(tmp_hx_.data(), a.xhat2.data(), a.rstd2.data(), vw(b.ln2_g), dtmp_.data(), vg(b.ln2_g),
                vg_or_null(b.ln2_b));
  add_residual();
  linear_backward(b.out, a.att.data(), dh, datt_.data(), vg_or_null(b.out_b));
  // Selective recompute: the attention core again, for the probabilities
  // not kept (its output, rewritten after its last use, is the same).
  if (recomputes_core()) attention_forward(a);
  attention_backward(a);
  rope(dqkv_.data(), true);
  linear_backward(b.qkv, a.a1.data(), dqkv_.data(), tmp_hx_.data(), vg_or_null(b.qkv_b));
  norm_backward(tmp_hx_.data(), a.xhat1.data(), a.rstd1.data(), vw(b.ln1_g), dtmp_.data(), vg(b.ln1_g),
                vg_or_null(b.ln1_b));
  add_residual();
}

// A pass over every gradient only when something has accumulated since the
// last optimizer step, which leaves them zero.
template <typename T>
void Gpt<T>::set_grads_zero() {
  grads_zero_ = true;
  grad_first_.assign(layout_.matrices.size(), true);
}

template <typename T>
void Gpt<T>::zero_grad() {
  if (grads_zero_) return;
  elementwise(KernelClass::Copy, double(shard_g_.size() + rep_g_.size()) * sizeof(M), [&] {
    k_->zero(shard_g_.data(), shard_g_.size() * sizeof(M));  // (empty until the first micro-step)
    k_->zero(rep_g_.data(), rep_g_.size() * sizeof(M));
  });
  set_grads_zero();
}

template <typename T>
double Gpt<T>::micro_step(const int* tokens, M grad_scale, bool last) {
  begin_step({true});
  forward(0, nullptr, tokens);
  const double loss = head(tokens, grad_scale, last);
  backward(0, nullptr, tokens, last);
  end_step();
  return loss;
}

template <typename T>
void Gpt<T>::forward(int slot, const T* received, const int* tokens, int chunk) {
  allocate_grads();
  grads_zero_ = false;
  std::vector<BlockActs>& acts = acts_[size_t(slot)];
  const long L = long(acts.size()), l0 = chunk * L;  // the chunk's blocks
  forward_slot_ = slot;
  T* h0 = acts[0].h_in.data();
  if (layout_.first && chunk == 0) {
    embedding_forward(k_->tokens(tokens, size_t(c_.micro_batch) * (m_.seq_len + 1), slot), h0);
  } else {  // a GPU would receive in place; the copy is the host's bookkeeping
    elementwise(KernelClass::Copy, 0, [&] { k_->copy(received, h0, size_t(ts_ * hx_) * sizeof(T)); });
    if (dev_.deferred()) dev_.synchronize();  // the pipeline receives into `received` again
  }
  T* out = layout_.last && chunk == layout_.chunks - 1 ? h_final_.data() : out_[size_t(slot)].data();
  for (long l = 0; l < L; ++l) {
    BlockActs& a = full_recompute() ? scratch_ : acts[size_t(l)];
    if (full_recompute())  // a GPU could read the kept input in place
      elementwise(KernelClass::Copy, 0, [&] { k_->copy(acts[size_t(l)].h_in.data(), a.h_in.data(), a.h_in.size() * sizeof(T)); });
    block_forward(int(l0 + l), a, l + 1 < L ? acts[size_t(l + 1)].h_in.data() : out);
  }
}

template <typename T>
double Gpt<T>::head(const int* tokens, M grad_scale, bool last_of_step) {
  begin_backward(last_of_step);
  const long S = m_.seq_len;
  k_->targets(k_->tokens(tokens, size_t(c_.micro_batch) * (S + 1), forward_slot_), targets_.data(), t_, S);
  norm_forward(h_final_.data(), vw(layout_.lnf_g), vw_or_null(layout_.lnf_b), a_f_.data(), xhat_f_.data(),
               rstd_f_.data());
  linear_forward(layout_.lm_head, a_f_.data(), nullptr, logits_.data(), layout_.tied);
  double loss = cross_entropy(grad_scale);
  linear_backward(layout_.lm_head, a_f_.data(), dlogits_.data(), tmp_hx_.data(), nullptr, layout_.tied);
  norm_backward(tmp_hx_.data(), xhat_f_.data(), rstd_f_.data(), vw(layout_.lnf_g), dresid_.data(), vg(layout_.lnf_g),
                vg_or_null(layout_.lnf_b));
  if (grads_in_t_) round_vector_grads();
  return loss;
}

template <typename T>
void Gpt<T>::begin_backward(bool last_of_step) {
  last_micro_ = last_of_step;  // (the step's bucket tracking begins in begin_step)
}

// The last virtual stage's output gradient, from head() until its chunk's
// backward (interleaved: other chunks run in between).
template <typename T>
void Gpt<T>::keep_output_grad(int slot) {
  elementwise(KernelClass::Copy, 0, [&] { k_->copy(dresid_.data(), grad_out_[size_t(slot)].data(), dresid_.size() * sizeof(T)); });
}

template <typename T>
void Gpt<T>::backward(int slot, const T* received_grad, const int* tokens, bool last_of_step, int chunk) {
  // Without `received_grad` the gradient is head()'s, which began backward.
  if (received_grad) {
    begin_backward(last_of_step);
    elementwise(KernelClass::Copy, 0, [&] { k_->copy(received_grad, dresid_.data(), size_t(ts_ * hx_) * sizeof(T)); });
    if (dev_.deferred()) dev_.synchronize();  // the pipeline receives into `received_grad` again
  }
  std::vector<BlockActs>& acts = acts_[size_t(slot)];
  const long l0 = chunk * long(acts.size());
  for (long l = long(acts.size()) - 1; l >= 0; --l) {
    BlockActs& a = full_recompute() ? scratch_ : acts[size_t(l)];
    if (full_recompute()) {
      elementwise(KernelClass::Copy, 0, [&] { k_->copy(acts[size_t(l)].h_in.data(), a.h_in.data(), a.h_in.size() * sizeof(T)); });
      block_forward(int(l0 + l), a, dtmp_.data());  // the output is not needed again
    }
    block_backward(int(l0 + l), a, dresid_.data());
  }
  if (layout_.first && chunk == 0)
    embedding_backward(tokens, dresid_.data());  // the host's (embedding_scatter_add)
  else
    elementwise(KernelClass::Copy, 0, [&] { k_->copy(dresid_.data(), grad_out_[size_t(slot)].data(), dresid_.size() * sizeof(T)); });
  if (grads_in_t_) round_vector_grads();  // the biases', norms' and positions' of this micro-step
}

// Matrix gradients and moments are allocated on first use, as llm.c does.
template <typename T>
void Gpt<T>::allocate_grads() {
  if (shard_g_.empty()) shard_g_.assign(layout_.shard_total, M(0));
  if (grads_in_t_ && wire_.empty()) wire_.assign(layout_.shard_total + layout_.vector_total, T(0));
}

// g rounded to T in place, through `scratch` (n values of the wire).
template <typename T>
void Gpt<T>::round_grads(M* g, T* scratch, size_t n) {
  elementwise(KernelClass::Copy, 0, [&] {
    k_->narrow(g, scratch, n);
    k_->widen(scratch, g, n);
  });
}

// Through the matrix's own stretch of the wire: a bucket is posted only once
// every matrix in it is final, so that stretch is not in flight.
template <typename T>
void Gpt<T>::round_matrix_grad(int mi) {
  const MatrixParam& p = layout_.matrices[size_t(mi)];
  round_grads(&shard_g_[p.offset], &wire_[p.offset], p.shard_n);
}

template <typename T>
void Gpt<T>::round_vector_grads() {
  round_grads(rep_g_.data(), rep_wire(), rep_g_.size());
}

template <typename T>
std::vector<std::pair<std::string, std::vector<double>>> Gpt<T>::canonical_parameters() {
  dev_.synchronize();  // read on the host
  const Coords& co = comm_.coords();
  std::vector<std::pair<std::string, std::vector<double>>> out;
  auto reduce = [&](const std::string& name, std::vector<double>& full) {
    if (comm_.sum_to_root(full.data(), full.size())) out.emplace_back(name, std::move(full));
  };

  // Every parameter of the model, in one stage's order, on every rank: a
  // stage contributes the ones it holds (matched by id), zeros elsewhere.
  Grid whole = c_.grid;
  whole.p = 1;
  const ParamLayout all = param_layout(m_, whole, 0);
  auto mine = [](const auto& list, int id) {
    for (const auto& q : list)
      if (q.id == id) return &q;
    return static_cast<decltype(&list[0])>(nullptr);
  };
  for (const MatrixParam& whole_p : all.matrices) {
    std::vector<double> full(size_t(whole_p.rows) * whole_p.cols, 0.0);
    const MatrixParam* here = mine(layout_.matrices, whole_p.id);
    const bool copy = layout_.tied_copy >= 0 && here == &layout_.matrices[size_t(layout_.tied_copy)];
    if (here && owns_matrix(co) && !copy) {
      const MatrixParam& p = *here;
      for (size_t i = 0; i < p.shard_n; ++i) {
        long r, c;
        matrix_element(p, co, i, r, c);
        full[size_t(r) * p.cols + c] = double(shard_w_[p.offset + i]);
      }
    }
    reduce(whole_p.name, full);
  }
  for (const VectorParam& whole_p : all.vectors) {
    std::vector<double> full(size_t(whole_p.rows) * whole_p.cols, 0.0);
    const VectorParam* here = mine(layout_.vectors, whole_p.id);
    if (here && owns_vector(*here, co)) {
      const VectorParam& p = *here;
      for (size_t i = 0; i < p.n; ++i) {
        long r, c;
        vector_element(p, co, i, r, c);
        full[size_t(r) * p.cols + c] = double(rep_w_[p.offset + i]);
      }
    }
    reduce(whole_p.name, full);
  }
  return out;
}

template class Gpt<float>;
template class Gpt<double>;
template class Gpt<bf16>;

}  // namespace ff::engine
