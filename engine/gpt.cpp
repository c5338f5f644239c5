#include "gpt.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "adamw.hpp"
#include "clock.hpp"
#include "init_normal.hpp"
#include "layers.hpp"
#include "rng.hpp"

namespace ff::engine {

template <typename T>
Gpt<T>::Gpt(Comm& comm, const ModelSpec& m, const Config& c, uint64_t seed, const BucketSizes& sizes)
    : comm_(comm), dev_(comm.device()), k_(kernels_for<T>(comm.device())), m_(m), c_(c), sizes_(sizes),
      layout_(param_layout(m, c.grid, comm.coord(Axis::P))) {
  const Grid& g = c.grid;
  t_ = long(c.micro_batch) * m.seq_len;
  hx_ = m.hidden / g.x;
  hy_ = m.hidden / g.y;
  fy_ = m.ffn / g.y;
  vy_ = m.padded_vocab / g.y;
  heads_y_ = m.heads / g.y;
  head_dim_ = m.hidden / m.heads;

  // Matrix gradients and moments are allocated on first use, as llm.c does:
  // start-up touches only the weights and what the forward pass needs.
  shard_w_.assign(layout_.shard_total, T(0));
  rep_w_.assign(layout_.vector_total, T(0));
  rep_g_.assign(layout_.vector_total, M(0));
  init_parameters(seed);
  set_grads_zero();

  if (g.z > 1)
    for (auto& b : gather_buf_) b.assign(layout_.largest_block, T(0));
  const size_t slots = size_t(g.p);
  acts_.assign(slots, std::vector<BlockActs>(layout_.blocks.size()));
  for (auto& slot : acts_)
    for (auto& a : slot) size_acts(a, !c.recompute);
  if (c.recompute) size_acts(scratch_, true);
  if (g.p > 1) {
    out_.assign(slots, Buffer<T>(size_t(t_ * hx_), T(0)));
    grad_out_.assign(slots, Buffer<T>(size_t(t_ * hx_), T(0)));
  }
  for (auto* v : {&h_final_, &xhat_f_, &a_f_, &tmp_hx_, &dresid_, &dtmp_}) v->assign(t_ * hx_, T(0));
  rstd_f_.assign(t_, M(0));
  logits_.assign(t_ * vy_, T(0));
  dlogits_.assign(t_ * vy_, T(0));
  dffn_.assign(t_ * fy_, T(0));
  dffn2_.assign(t_ * fy_, T(0));
  datt_.assign(t_ * hy_, T(0));
  dqkv_.assign(t_ * 3 * hy_, T(0));
  targets_.assign(t_, 0);
  for (auto* v : {&ln_sum_, &ln_mean_, &ln_sq_, &ce_max_}) v->assign(t_, M(0));
  for (auto* v : {&ln_grad_stat_, &ce_stat_}) v->assign(2 * t_, M(0));
  if (kMasterCopy && g.z > 1 && layout_.first) emb_grad_.assign(layout_.matrices[layout_.embedding].block_n(), M(0));
  slots_.reserve(kMaxInflight);  // completion callbacks hold references into it
  build_buckets();
}

template <typename T>
void Gpt<T>::build_buckets() {
  buckets_.clear();
  const bool odp = c_.overlap.odp && c_.grid.d > 1;
  const double bucket_bytes = sizes_.dp_bytes;
  const size_t total = layout_.shard_total;
  size_t hi = total, moment = 0;
  // Offload: chunks of k optimizer buckets from the top, across matrix
  // boundaries (the optimizer sees one flat arena).
  const size_t chunk = c_.offload ? sizes_.offload_elements * size_t(sizes_.offload_chunk) : 0;
  for (; chunk > 0 && hi > 0; hi = buckets_.back().lo) {
    Bucket b;
    b.lo = hi > chunk ? hi - chunk : 0, b.hi = hi;
    buckets_.push_back(std::move(b));
  }
  // Without ODP one bucket, or sharded one per matrix: MODEL.md §10 prices
  // the sharded step as a reduce-scatter and an all-gather per weight.
  for (int mi = int(layout_.matrices.size()) - 1; mi >= 0 && hi > 0; --mi) {
    const size_t lo = layout_.matrices[size_t(mi)].offset;
    const bool full = odp ? double(hi - lo) * sizeof(M) >= bucket_bytes : sharded() || lo == 0;
    if (!full && mi > 0) continue;
    Bucket b;
    b.lo = lo, b.hi = hi;
    hi = lo;
    buckets_.push_back(std::move(b));
  }
  const int g = c_.grid.d, d = comm_.coord(Axis::D);
  // The replicated vectors are sharded too (as Megatron's distributed
  // optimizer shards every parameter): one more part of one bucket.
  const size_t nv = layout_.vector_total;
  rep_lo_ = sharded() ? part_begin(nv, g, d) : 0;
  rep_hi_ = sharded() ? part_begin(nv, g, d + 1) : nv;
  if (sharded()) {
    rep_part_.assign(rep_hi_ - rep_lo_, M(0));
  }
  for (Bucket& b : buckets_) {
    const size_t n = b.hi - b.lo;
    b.own_lo = b.lo + (sharded() ? part_begin(n, g, d) : 0);
    b.own_hi = b.lo + (sharded() ? part_begin(n, g, d + 1) : n);
    b.moment = moment;
    moment += b.own_hi - b.own_lo;
    if (sharded()) b.part.assign(b.own_hi - b.own_lo, M(0));
  }
}

// A matrix's gradient is final on the last micro-step once its weight-
// gradient GEMM has accumulated into the shard (G_z = 1) or its reduce-
// scatter over Z has been added in; in either case in backward order.
template <typename T>
void Gpt<T>::gradient_done(int mi) {
  if (last_micro_) final_lo_ = std::min(final_lo_, layout_.matrices[size_t(mi)].offset);
}

// Posted from the schedule, never from a completion callback: every rank of
// D posts the buckets in the same order whenever each becomes ready.
template <typename T>
void Gpt<T>::post_ready_buckets() {
  if (!(c_.overlap.odp && c_.grid.d > 1)) return;
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].lo >= final_lo_)
    post_bucket(buckets_[next_bucket_++]);
}

template <typename T>
void Gpt<T>::post_bucket(Bucket& b) {
  const size_t n = b.hi - b.lo;
  if (!sharded()) {
    b.ticket = comm_.iall_reduce(Axis::D, &shard_g_[b.lo], n);
    return;
  }
  M* dst = &shard_g_[b.own_lo];
  b.ticket = comm_.ireduce_scatter_parts(Axis::D, &shard_g_[b.lo], b.part.data(), n, [this, &b, dst] {
    const double bytes = double(b.part.size()) * sizeof(M);
    elementwise(2 * bytes, [&] { k_->copy(b.part.data(), dst, size_t(bytes)); });
  });
}

template <typename T>
void Gpt<T>::size_acts(BlockActs& a, bool full) {
  a.h_in.assign(t_ * hx_, T(0));
  if (!full) return;
  for (auto* v : {&a.xhat1, &a.a1, &a.h_mid, &a.xhat2, &a.a2}) v->assign(t_ * hx_, T(0));
  a.rstd1.assign(t_, M(0));
  a.rstd2.assign(t_, M(0));
  a.qkv.assign(t_ * 3 * hy_, T(0));
  a.probs.assign(long(c_.micro_batch) * heads_y_ * m_.seq_len * m_.seq_len, T(0));
  a.att.assign(t_ * hy_, T(0));
  a.f.assign(t_ * fy_, T(0));
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
void Gpt<T>::schedule_op(bool forward_op) {
  const auto& blocks = layout_.blocks;
  if (forward_op) {
    if (layout_.first) schedule_.push_back(layout_.embedding);
    for (const BlockParams& b : blocks)
      for (int mi : {b.qkv, b.out, b.fc1, b.fc2}) schedule_.push_back(mi);
    if (layout_.last) {
      schedule_.push_back(layout_.lm_head);
      schedule_.push_back(layout_.lm_head);  // the head's backward re-gathers
    }
    return;
  }
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
    if (c_.recompute)
      for (int mi : {b->qkv, b->out, b->fc1, b->fc2}) schedule_.push_back(mi);
    for (int mi : {b->fc2, b->fc1, b->out, b->qkv}) schedule_.push_back(mi);
  }
  // The embedding's backward scatters into its block: no gather.
}

template <typename T>
void Gpt<T>::begin_step(const std::vector<bool>& forward_ops) {
  schedule_.clear();
  cursor_ = 0;
  if (c_.grid.z == 1) return;  // nothing is gathered: acquire() keeps no schedule
  for (bool f : forward_ops) {
    schedule_op(f);
    if (f && layout_.last) schedule_op(false);  // the last stage's backward follows its forward
  }
}

template <typename T>
void Gpt<T>::end_step() {
  comm_.wait_all();
  post_ready_buckets();  // what the last reduce-scatters over Z completed
  if (c_.grid.z > 1 && cursor_ != schedule_.size()) throw std::logic_error("engine: weight schedule not consumed");
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
void Gpt<T>::submit_weight_grad(int mi, GradSlot& slot) {
  const MatrixParam& p = layout_.matrices[mi];
  M* acc = &shard_g_[p.offset];
  const bool first = grad_first_[size_t(mi)] && !kMasterCopy;
  grad_first_[size_t(mi)] = false;
  T* dest = slot.part.data();
  if constexpr (!kMasterCopy)
    if (first) dest = acc;
  auto accumulate = [this, mi, acc, &slot, first, n = p.shard_n]() {
    if (!first)
      elementwise(n * (2.0 * sizeof(M) + sizeof(T)), [&] { k_->accumulate(acc, slot.part.data(), n); });
    gradient_done(mi);
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

// C = alpha·op(A)·op(B) + beta·C as one kernel, timed into gemm_stats: on the
// cpu the host's BLAS time, elsewhere the device's.
template <typename T>
template <typename C>
void Gpt<T>::gemm(bool ta, bool tb, int m, int n, int k, M alpha, const T* A, int lda, const T* B, int ldb, M beta,
                  C* Cp, int ldc) {
  if (m == 0 || n == 0) return;
  const double flops = 2.0 * m * n * k;
  double blas_s = 0;
  const double device_s = dev_.launch(Kernel{flops, 0}, [&] {
    if constexpr (std::is_same_v<C, T>) blas_s = k_->gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc);
    else blas_s = k_->gemm_to_master(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc);
  });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += flops;
}

// out[t, n] = in[t, k] · W[k, n], partial sums reduced over X (normal layer)
// or Y (transposed), then the bias.
template <typename T>
void Gpt<T>::linear_forward(int mi, const T* in, const T* bias, T* out) {
  const MatrixParam& p = layout_.matrices[mi];
  const T* W = acquire(mi);
  const int k = int(p.block_rows), n = int(p.block_cols);
  gemm(false, false, int(t_), n, k, M(1), in, k, W, n, M(0), out, n);
  comm_.all_reduce(p.transposed ? Axis::Y : Axis::X, out, size_t(t_) * n);
  if (bias)  // a GEMM epilogue on a GPU: no traffic of its own
    elementwise(0, [&] { k_->add_bias(out, bias, t_, n); });
}

// din = dout · Wᵀ (reduced over the input's other axis), dW = inᵀ · dout.
// Under OAR the din all-reduce runs while dW is computed.
template <typename T>
void Gpt<T>::linear_backward(int mi, const T* in, const T* dout, T* din, M* dbias) {
  const MatrixParam& p = layout_.matrices[mi];
  const int k = int(p.block_rows), n = int(p.block_cols);
  if (dbias)  // the weight-gradient GEMM's epilogue on a GPU
    elementwise(0, [&] { k_->bias_grad(dout, dbias, t_, n); });
  const T* W = acquire(mi);
  gemm(false, true, int(t_), k, n, M(1), dout, n, W, n, M(0), din, k);
  const Axis in_axis = p.transposed ? Axis::X : Axis::Y;
  Comm::Ticket oar = 0;
  if (c_.overlap.oar)
    oar = comm_.iall_reduce(in_axis, din, size_t(t_) * k);
  else
    comm_.all_reduce(in_axis, din, size_t(t_) * k);
  if (c_.grid.z == 1) {
    // The block is the shard: accumulate into it in the GEMM (β = 1; BLAS
    // reads and writes C once either way) instead of a full product in a
    // slot and a second pass adding it in.
    gemm(true, false, k, n, int(t_), M(1), in, k, dout, n, M(1), &shard_g_[p.offset], n);
    gradient_done(mi);
  } else {
    GradSlot& slot = grad_slot();
    gemm(true, false, k, n, int(t_), M(1), in, k, dout, n, M(0), slot.full.data(), n);
    submit_weight_grad(mi, slot);
  }
  comm_.wait(oar);
  post_ready_buckets();
}

template <typename T>
void Gpt<T>::embedding_forward(const int* tokens, T* h0) {
  const MatrixParam& p = layout_.matrices[layout_.embedding];
  const T* E = acquire(layout_.embedding);
  const long S = m_.seq_len, v0 = long(comm_.coord(Axis::Y)) * vy_;
  const double bytes = double(t_) * hx_ * sizeof(T);
  elementwise(bytes, [&] { k_->embedding_lookup(tokens, E, p.block_cols, h0, t_, S, hx_, vy_, v0); });
  comm_.all_reduce(Axis::Y, h0, size_t(t_) * hx_);
  const T* pos = vw(layout_.positions);
  elementwise(2 * bytes, [&] { k_->add_positions(h0, pos, t_, S, hx_); });
}

template <typename T>
void Gpt<T>::embedding_backward(const int* tokens, const T* dh0) {
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
  M* gpos = vg(layout_.positions);
  elementwise(3.0 * t_ * hx_ * sizeof(T), [&] {
    if (slot) k_->zero(dE, p.block_n() * sizeof(M));
    k_->embedding_scatter_add(tokens, dh0, dE, p.block_cols, gpos, t_, S, hx_, vy_, v0);
    if (slot && kMasterCopy) k_->narrow(dE, slot->full.data(), p.block_n());
  });
  if (slot) submit_weight_grad(layout_.embedding, *slot);
  else gradient_done(layout_.embedding);
  post_ready_buckets();
}

// LayerNorm's kernels move 2·t·hx (forward) and 3·t·hx (backward) values in
// all, MODEL.md's count: a GPU reads x once and keeps (mean, rstd), however
// many passes the host makes.
template <typename T>
void Gpt<T>::layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, T* xhat, M* rstd) {
  const long H = m_.hidden;
  const double values = double(t_) * hx_ * sizeof(T);
  elementwise(values, [&] { k_->layernorm_row_sums(x, ln_sum_.data(), t_, hx_); });
  comm_.all_reduce(Axis::X, ln_sum_.data(), size_t(t_));
  elementwise(0, [&] { k_->layernorm_centred_squares(x, ln_sum_.data(), ln_mean_.data(), ln_sq_.data(), t_, hx_, H); });
  comm_.all_reduce(Axis::X, ln_sq_.data(), size_t(t_));
  elementwise(values, [&] {
    k_->layernorm_normalize(x, ln_mean_.data(), ln_sq_.data(), gamma, beta, y, xhat, rstd, t_, hx_, H);
  });
}

template <typename T>
void Gpt<T>::layernorm_backward(const T* dy, const T* xhat, const M* rstd, const T* gamma, T* dx, M* dgamma,
                                M* dbeta) {
  const double values = double(t_) * hx_ * sizeof(T);
  elementwise(values, [&] { k_->layernorm_backward_sums(dy, xhat, gamma, ln_grad_stat_.data(), t_, hx_); });
  comm_.all_reduce(Axis::X, ln_grad_stat_.data(), size_t(2 * t_));
  elementwise(2 * values, [&] {
    k_->layernorm_backward_apply(dy, xhat, rstd, gamma, ln_grad_stat_.data(), dx, dgamma, dbeta, t_, hx_,
                                 long(m_.hidden));
  });
}

// Softmax traffic as MODEL.md counts it: 2·t·vy values forward, 2·t·vy
// backward, in M (fp32 for bf16).
template <typename T>
double Gpt<T>::cross_entropy(M grad_scale) {
  const long v0 = long(comm_.coord(Axis::Y)) * vy_, valid = vocab_valid(vy_, v0, long(m_.vocab));
  const double values = 2.0 * t_ * vy_ * sizeof(M);
  elementwise(0, [&] { k_->cross_entropy_row_max(logits_.data(), ce_max_.data(), t_, vy_, valid); });
  comm_.all_reduce(Axis::Y, ce_max_.data(), size_t(t_), ReduceOp::Max);
  elementwise(values, [&] {
    k_->cross_entropy_exp_sums(logits_.data(), targets_.data(), ce_max_.data(), dlogits_.data(), ce_stat_.data(), t_,
                               vy_, v0, valid);
  });
  comm_.all_reduce(Axis::Y, ce_stat_.data(), size_t(2 * t_));
  double loss = 0;
  elementwise(values, [&] {
    loss = k_->cross_entropy_finish(targets_.data(), ce_max_.data(), ce_stat_.data(), dlogits_.data(), t_, vy_, v0,
                                    valid, grad_scale);
  });
  return loss;
}

// Attention is one kernel each way, as fused kernels are on a GPU: QKᵀ and PV
// over the full S×S (4·S²·dh FLOPs per head and sequence), backward twice
// that; the softmax reads and writes the E = seqs·heads·S² scores (2E values),
// its backward reads two and writes one (3E): MODEL.md's unfused attention.
template <typename T>
void Gpt<T>::attention_forward(BlockActs& a) {
  const long seqs = c_.micro_batch, S = m_.seq_len;
  const double flops = 4.0 * seqs * heads_y_ * S * S * head_dim_, scores = double(seqs) * heads_y_ * S * S;
  double blas_s = 0;
  const double device_s = dev_.launch(Kernel{flops, 2 * scores * sizeof(T)}, [&] {
    blas_s = k_->attention_forward(a.qkv.data(), a.att.data(), a.probs.data(), seqs, S, heads_y_, head_dim_);
  });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += flops;
}

template <typename T>
void Gpt<T>::attention_backward(BlockActs& a) {
  const long seqs = c_.micro_batch, S = m_.seq_len;
  const double flops = 8.0 * seqs * heads_y_ * S * S * head_dim_, scores = double(seqs) * heads_y_ * S * S;
  double blas_s = 0;
  const double device_s = dev_.launch(Kernel{flops, 3 * scores * sizeof(T)}, [&] {
    blas_s = k_->attention_backward(a.qkv.data(), a.probs.data(), datt_.data(), dqkv_.data(), seqs, S, heads_y_,
                                    head_dim_);
  });
  gemm_stats.seconds += dev_.host_is_device() ? blas_s : device_s;
  gemm_stats.flops += flops;
}

template <typename T>
void Gpt<T>::block_forward(int l, BlockActs& a, T* h_out) {
  const BlockParams& b = layout_.blocks[l];
  const long n_hx = t_ * hx_;
  const double residual = 3.0 * n_hx * sizeof(T), gelu = 2.0 * t_ * fy_ * sizeof(T);
  layernorm_forward(a.h_in.data(), vw(b.ln1_g), vw(b.ln1_b), a.a1.data(), a.xhat1.data(), a.rstd1.data());
  linear_forward(b.qkv, a.a1.data(), vw(b.qkv_b), a.qkv.data());
  attention_forward(a);
  linear_forward(b.out, a.att.data(), vw(b.out_b), tmp_hx_.data());
  elementwise(residual, [&] { k_->add(a.h_in.data(), tmp_hx_.data(), a.h_mid.data(), size_t(n_hx)); });
  layernorm_forward(a.h_mid.data(), vw(b.ln2_g), vw(b.ln2_b), a.a2.data(), a.xhat2.data(), a.rstd2.data());
  linear_forward(b.fc1, a.a2.data(), vw(b.fc1_b), a.f.data());
  elementwise(gelu, [&] { k_->gelu_forward(a.f.data(), a.g.data(), t_ * fy_); });
  linear_forward(b.fc2, a.g.data(), vw(b.fc2_b), tmp_hx_.data());
  elementwise(residual, [&] { k_->add(a.h_mid.data(), tmp_hx_.data(), h_out, size_t(n_hx)); });
}

// dh: the gradient of the block's output on entry, of its input on exit.
template <typename T>
void Gpt<T>::block_backward(int l, BlockActs& a, T* dh) {
  const BlockParams& b = layout_.blocks[l];
  const long n_hx = t_ * hx_;
  const double residual = 3.0 * n_hx * sizeof(T), gelu = 3.0 * t_ * fy_ * sizeof(T);
  auto add_residual = [&] {
    elementwise(residual, [&] { k_->add(dh, dtmp_.data(), dh, size_t(n_hx)); });
  };
  linear_backward(b.fc2, a.g.data(), dh, dffn_.data(), vg(b.fc2_b));
  elementwise(gelu, [&] { k_->gelu_backward(a.f.data(), dffn_.data(), dffn2_.data(), t_ * fy_); });
  linear_backward(b.fc1, a.a2.data(), dffn2_.data(), tmp_hx_.data(), vg(b.fc1_b));
  layernorm_backward(tmp_hx_.data(), a.xhat2.data(), a.rstd2.data(), vw(b.ln2_g), dtmp_.data(), vg(b.ln2_g),
                     vg(b.ln2_b));
  add_residual();
  linear_backward(b.out, a.att.data(), dh, datt_.data(), vg(b.out_b));
  attention_backward(a);
  linear_backward(b.qkv, a.a1.data(), dqkv_.data(), tmp_hx_.data(), vg(b.qkv_b));
  layernorm_backward(tmp_hx_.data(), a.xhat1.data(), a.rstd1.data(), vw(b.ln1_g), dtmp_.data(), vg(b.ln1_g),
                     vg(b.ln1_b));
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
  elementwise(double(shard_g_.size() + rep_g_.size()) * sizeof(M), [&] {
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
void Gpt<T>::forward(int slot, const T* received, const int* tokens) {
  if (shard_g_.empty()) shard_g_.assign(layout_.shard_total, M(0));
  grads_zero_ = false;
  std::vector<BlockActs>& acts = acts_[size_t(slot)];
  const long L = long(layout_.blocks.size());
  forward_slot_ = slot;
  T* h0 = acts[0].h_in.data();
  if (layout_.first) {
    embedding_forward(k_->tokens(tokens, size_t(c_.micro_batch) * (m_.seq_len + 1), slot), h0);
  } else {  // a GPU would receive in place; the copy is the host's bookkeeping
    elementwise(0, [&] { k_->copy(received, h0, size_t(t_ * hx_) * sizeof(T)); });
    if (dev_.deferred()) dev_.synchronize();  // the pipeline receives into `received` again
  }
  T* out = layout_.last ? h_final_.data() : out_[size_t(slot)].data();
  for (long l = 0; l < L; ++l) {
    BlockActs& a = c_.recompute ? scratch_ : acts[size_t(l)];
    if (c_.recompute)  // a GPU could read the kept input in place
      elementwise(0, [&] { k_->copy(acts[size_t(l)].h_in.data(), a.h_in.data(), a.h_in.size() * sizeof(T)); });
    block_forward(int(l), a, l + 1 < L ? acts[size_t(l + 1)].h_in.data() : out);
  }
}

template <typename T>
double Gpt<T>::head(const int* tokens, M grad_scale, bool last_of_step) {
  begin_backward(last_of_step);
  const long S = m_.seq_len;
  k_->targets(k_->tokens(tokens, size_t(c_.micro_batch) * (S + 1), forward_slot_), targets_.data(), t_, S);
  layernorm_forward(h_final_.data(), vw(layout_.lnf_g), vw(layout_.lnf_b), a_f_.data(), xhat_f_.data(),
                    rstd_f_.data());
  linear_forward(layout_.lm_head, a_f_.data(), nullptr, logits_.data());
  double loss = cross_entropy(grad_scale);
  linear_backward(layout_.lm_head, a_f_.data(), dlogits_.data(), tmp_hx_.data(), nullptr);
  layernorm_backward(tmp_hx_.data(), xhat_f_.data(), rstd_f_.data(), vw(layout_.lnf_g), dresid_.data(),
                     vg(layout_.lnf_g), vg(layout_.lnf_b));
  return loss;
}

template <typename T>
void Gpt<T>::begin_backward(bool last_of_step) {
  last_micro_ = last_of_step;
  final_lo_ = layout_.shard_total;
  next_bucket_ = 0;
}

template <typename T>
void Gpt<T>::backward(int slot, const T* received_grad, const int* tokens, bool last_of_step) {
  if (!layout_.last) begin_backward(last_of_step);  // the last stage's began in head()
  if (!layout_.last) {
    elementwise(0, [&] { k_->copy(received_grad, dresid_.data(), size_t(t_ * hx_) * sizeof(T)); });
    if (dev_.deferred()) dev_.synchronize();  // the pipeline receives into `received_grad` again
  }
  std::vector<BlockActs>& acts = acts_[size_t(slot)];
  for (long l = long(layout_.blocks.size()) - 1; l >= 0; --l) {
    BlockActs& a = c_.recompute ? scratch_ : acts[size_t(l)];
    if (c_.recompute) {
      elementwise(0, [&] { k_->copy(acts[size_t(l)].h_in.data(), a.h_in.data(), a.h_in.size() * sizeof(T)); });
      block_forward(int(l), a, dtmp_.data());  // the output is not needed again
    }
    block_backward(int(l), a, dresid_.data());
  }
  if (layout_.first)
    embedding_backward(k_->tokens(tokens, size_t(c_.micro_batch) * (m_.seq_len + 1), slot), dresid_.data());
  else
    elementwise(0, [&] { k_->copy(dresid_.data(), grad_out_[size_t(slot)].data(), dresid_.size() * sizeof(T)); });
}

// AdamW's traffic on n parameters: master, gradient, m and v read and
// written (8 values of M each), and the weight written where it is not the
// master (`w` non-null).
template <typename T>
double Gpt<T>::adamw_bytes(size_t n, const T* w) {
  return double(n) * (8.0 * sizeof(M) + (w ? sizeof(T) : 0));
}

template <typename T>
double Gpt<T>::optimizer_step(const AdamW& opt) {
  if (shard_g_.empty()) shard_g_.assign(layout_.shard_total, M(0));
  if (adam_steps_ == 0) {
    // The optimizer's state, at the first step: m and v of this rank's parts
    // (sharded: ZeRO-1's saving) and, where T ≠ M, their masters, the
    // weights as initialised. Under offload it is the host arena from the
    // moment it exists (pinned, on a GPU): made on the device, it would hold
    // through the first step as much device memory as offload saves; the
    // device gets two sets of bucket buffers, which only kernels and copies
    // touch.
    const size_t owned =
        buckets_.empty() ? 0 : buckets_.back().moment + buckets_.back().own_hi - buckets_.back().own_lo;
    const size_t vectors = rep_hi_ - rep_lo_;
    auto state = [&] {
      for (Buffer<M>* a : {&shard_m_, &shard_v_}) a->assign(owned, M(0));
      for (Buffer<M>* a : {&rep_m_, &rep_v_}) a->assign(vectors, M(0));
      if (kMasterCopy) shard_master_.assign(owned, M(0)), rep_master_.assign(vectors, M(0));
    };
    if (c_.offload) dev_.allocate_on_host(state);
    else state();
    if (kMasterCopy) {
      elementwise(0, [&] {
        for (const Bucket& b : buckets_)
          k_->widen(&shard_w_[b.own_lo], &shard_master_[b.moment], b.own_hi - b.own_lo);
        k_->widen(&rep_w_[rep_lo_], rep_master_.data(), vectors);
      });
      dev_.synchronize();  // offload's copies, on other streams, read them
    }
    if (c_.offload) {
      const size_t B = std::min(sizes_.offload_elements, std::max(layout_.shard_total, layout_.vector_total));
      dev_.allocate_on_device([&] {
        for (OffloadSlot& sl : offload_slots_) {
          sl.m.assign(B, M(0)), sl.v.assign(B, M(0));
          if (kMasterCopy) sl.master.assign(B, M(0));
        }
      });
    }
  }
  ++adam_steps_;
  AdamWStep<M> s;
  s.clip = M(1);
  s.beta1 = M(opt.beta1), s.beta2 = M(opt.beta2), s.lr = M(opt.lr), s.eps = M(opt.eps);
  s.c1 = M(1) / (M(1) - M(std::pow(opt.beta1, double(adam_steps_))));
  s.c2 = M(1) / (M(1) - M(std::pow(opt.beta2, double(adam_steps_))));
  s.decay = M(opt.weight_decay);  // the shard arena holds matrices only
  const bool clipping = opt.clip > 0;
  // Offload without clipping (AxoNN's CPUAdam): each chunk's optimizer runs
  // as soon as its own all-reduce is in, under the chunks still in flight.
  // Clipping by the global norm needs every chunk first.
  const bool update_per_chunk = c_.offload && !clipping;
  // AdamW on n parameters, or offloaded, through the bucket buffers.
  auto adam = [&](M* master, M* g, M* m, M* v, T* w, size_t n) {
    if (c_.offload) update_offloaded(master, g, m, v, w, n, s);
    else elementwise(adamw_bytes(n, w), [&] { k_->adamw_update(master, g, m, v, w, n, s); });
  };
  auto adam_bucket = [&](const Bucket& b) {
    adam(shard_master(b.own_lo, b.moment), &shard_g_[b.own_lo], &shard_m_[b.moment], &shard_v_[b.moment],
         weight_copy(&shard_w_[b.own_lo]), b.own_hi - b.own_lo);
  };

  comm_.all_reduce(Axis::Z, rep_g_.data(), rep_g_.size());
  if (sharded()) {
    M* dst = &rep_g_[rep_lo_];
    comm_.wait(comm_.ireduce_scatter_parts(Axis::D, rep_g_.data(), rep_part_.data(), rep_g_.size(), [&] {
      const double bytes = double(rep_part_.size()) * sizeof(M);
      elementwise(2 * bytes, [&] { k_->copy(rep_part_.data(), dst, size_t(bytes)); });
    }));
  } else {
    comm_.all_reduce(Axis::D, rep_g_.data(), rep_g_.size());
  }
  // The shard arena over D: what ODP has not posted yet, then each bucket
  // waited for in order; without ODP, sharding or offload, one blocking
  // all-reduce per matrix, as MODEL.md §2 prices it.
  if (c_.overlap.odp || sharded() || c_.offload) {
    for (; next_bucket_ < buckets_.size(); ++next_bucket_) post_bucket(buckets_[next_bucket_]);
  } else {
    for (auto p = layout_.matrices.rbegin(); p != layout_.matrices.rend(); ++p)
      comm_.all_reduce(Axis::D, &shard_g_[p->offset], p->shard_n);
  }

  // Each value counted once: the D replicas hold the same reduced shard, so
  // each sums the squares of the part it owns (1/G_d of each bucket) rather
  // than replica 0 all of it while the others wait; replicated vectors by
  // one rank of their replicas. (Its traffic is in AdamW's count below: the
  // norm reads the gradients AdamW reads, as one fused clipping pass does.)
  const Coords& co = comm_.coords();
  const int gd = comm_.size(Axis::D), d = comm_.coord(Axis::D);
  double sq = 0;
  for (const Bucket& b : buckets_) {
    comm_.wait(b.ticket);  // 0, nothing to wait for, where the reduction was blocking
    elementwise(0, [&] {
      const size_t lo = sharded() ? b.own_lo : b.lo + part_begin(b.hi - b.lo, gd, d);
      const size_t hi = sharded() ? b.own_hi : b.lo + part_begin(b.hi - b.lo, gd, d + 1);
      sq += k_->sum_of_squares(&shard_g_[lo], hi - lo);
    });
    if (update_per_chunk) adam_bucket(b);
  }
  elementwise(0, [&] {
    // Sharded, the part of each vector this D rank holds reduced.
    Coords first = co;
    first[int(Axis::D)] = 0;
    for (const VectorParam& p : layout_.vectors) {
      const size_t lo = std::max(p.offset, rep_lo_), hi = std::min(p.offset + p.n, rep_hi_);
      if (owns_vector(p, sharded() ? first : co) && lo < hi) sq += k_->sum_of_squares(&rep_g_[lo], hi - lo);
    }
  });
  const double norm = std::sqrt(comm_.sum_all(sq));
  if (clipping) s.clip = M(std::min(1.0, opt.clip / (norm + 1e-6)));

  if (!update_per_chunk)
    for (const Bucket& b : buckets_) adam_bucket(b);
  s.decay = M(0);
  adam(rep_master(), &rep_g_[rep_lo_], rep_m_.data(), rep_v_.data(), weight_copy(&rep_w_[rep_lo_]), rep_hi_ - rep_lo_);
  if (sharded()) {
    // The parts other ranks updated come back with their weights; their
    // gradients here are partial sums AdamW did not consume: zeroed (a
    // memset MODEL.md does not price: 1/8 of AdamW's traffic per value).
    elementwise(0, [&] {
      for (const Bucket& b : buckets_) {
        k_->zero(&shard_g_[b.lo], (b.own_lo - b.lo) * sizeof(M));
        k_->zero(&shard_g_[b.own_hi], (b.hi - b.own_hi) * sizeof(M));
      }
      k_->zero(rep_g_.data(), rep_lo_ * sizeof(M));
      k_->zero(rep_g_.data() + rep_hi_, (rep_g_.size() - rep_hi_) * sizeof(M));
    });
    for (const Bucket& b : buckets_) comm_.all_gather_parts(Axis::D, &shard_w_[b.lo], b.hi - b.lo);
    comm_.all_gather_parts(Axis::D, rep_w_.data(), rep_w_.size());
  }
  set_grads_zero();  // adamw_update leaves them zero
  // The moments are home (and their copies timed) before the step ends.
  for (const OffloadSlot& sl : offload_slots_) dev_.wait(sl.out);
  if (dev_.deferred()) dev_.synchronize();  // the next step's weight prefetch reads what AdamW wrote
  return norm;
}

// AxoNN's offloaded optimizer (MODEL.md §9): m, v and (where T ≠ M) the
// master live in the host arena (`m`, `v`, `master`); bucket by bucket they are copied into a set of the device's
// bucket buffers, updated with the weight and gradient where they are, and
// copied back. The sets alternate, so on a GPU bucket j + 1 comes in on one
// copy stream while bucket j is updated and bucket j − 1 goes out on the
// other, the host link busy both ways at once. On CPU ranks the copies are
// memcpy, timed as the host link. Between buckets the chunks still in
// flight are driven on.
template <typename T>
void Gpt<T>::update_offloaded(M* master, M* g, M* m, M* v, T* w, size_t n, const AdamWStep<M>& s) {
  const size_t B = offload_slots_[0].m.size(), count = (n + B - 1) / B;
  const Comm::Ticket last_chunk = buckets_.empty() ? 0 : buckets_.back().ticket;
  auto slot = [&](size_t j) -> OffloadSlot& { return offload_slots_[(offload_next_ + j) % 2]; };
  M* const arena[3] = {m, v, master};
  auto copy_in = [&](size_t j) {
    OffloadSlot& sl = slot(j);
    const size_t lo = j * B;
    sl.in = offload_copy(arena, lo, sl, std::min(B, n - lo), CopyWay::ToDevice, sl.out, last_chunk);
  };
  if (count > 0) copy_in(0);
  for (size_t j = 0; j < count; ++j) {
    if (j + 1 < count) copy_in(j + 1);
    OffloadSlot& sl = slot(j);
    const size_t lo = j * B, k = std::min(B, n - lo);
    dev_.stream_wait(sl.in);
    M* const mw = kMasterCopy ? sl.master.data() : master + lo;  // T = M: the weight itself, on the device
    T* const wk = w ? w + lo : nullptr;
    elementwise(adamw_bytes(k, wk), [&] { k_->adamw_update(mw, g + lo, sl.m.data(), sl.v.data(), wk, k, s); });
    sl.out = offload_copy(arena, lo, sl, k, CopyWay::ToHost, dev_.record(), last_chunk);
    ++offload_stats.buckets;
    dev_.progress();
  }
  offload_next_ = (offload_next_ + count) % 2;
}

// m, v and, where T ≠ M, the master of one bucket between the host arena
// (`arena`'s m, v and master, from element `lo`) and a set of bucket
// buffers, one way, after `after`; returns the last copy's event (the way's
// stream runs them in order). A copy issued while the last chunk's
// all-reduce is still in flight counts as hidden by it.
template <typename T>
Device::Event Gpt<T>::offload_copy(M* const arena[3], size_t lo, OffloadSlot& sl, size_t k, CopyWay way,
                                   Device::Event after, Comm::Ticket last_chunk) {
  const bool hidden = last_chunk != 0 && !comm_.done(last_chunk);
  auto timed = [this, hidden](double dt) {
    offload_stats.copy_s += dt;
    if (hidden) offload_stats.hidden_s += dt;
  };
  M* const device[3] = {sl.m.data(), sl.v.data(), sl.master.data()};
  Device::Event done = 0;
  for (int a = 0; a < (kMasterCopy ? 3 : 2); ++a) {
    const bool in = way == CopyWay::ToDevice;
    M* const host = arena[a] + lo;
    done = dev_.copy(in ? device[a] : host, in ? host : device[a], k * sizeof(M), way, {after}, timed);
  }
  if (way == CopyWay::ToHost)  // bytes each way
    offload_stats.copy_bytes += (kMasterCopy ? 3.0 : 2.0) * double(k) * sizeof(M);
  return done;
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
    if (here && owns_matrix(co)) {
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
