// The optimizer and the data-parallel reduction of Gpt<T>, apart from the
// schedule in gpt.cpp (forward, backward, layers, micro-steps) as llm.c keeps
// AdamW and ZeRO apart from the model: the shard arena's gradient buckets and
// their reduction over D as backward completes them (ODP; MODEL.md §10), the
// optimizer step (reductions, global norm and clipping, AdamW; sharded:
// reduce-scatter, the owned parts updated, all-gather, MODEL.md §10), and
// offload's bucket pipeline through the device's bucket buffers (MODEL.md §9).
#include "engine/gpt.hpp"

#include <algorithm>
#include <cmath>

#include "engine/adamw.hpp"

namespace ff::engine {

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
    if (grads_in_t_) rep_part_t_.assign(rep_hi_ - rep_lo_, T(0));
  }
  for (Bucket& b : buckets_) {
    const size_t n = b.hi - b.lo;
    b.own_lo = b.lo + (sharded() ? part_begin(n, g, d) : 0);
    b.own_hi = b.lo + (sharded() ? part_begin(n, g, d + 1) : n);
    b.moment = moment;
    moment += b.own_hi - b.own_lo;
    if (sharded() && grads_in_t_) b.part_t.assign(b.own_hi - b.own_lo, T(0));
    else if (sharded()) b.part.assign(b.own_hi - b.own_lo, M(0));
  }
}

// A matrix's gradient is final on the last micro-step once its weight-
// gradient GEMM has accumulated into the shard (G_z = 1) or its reduce-
// scatter over Z has been added in; in either case in backward order (a
// tied embedding, at offset 0, last: after its own backward or the exchange).
template <typename T>
void Gpt<T>::gradient_done(int mi, bool last) {
  if (last) final_lo_ = std::min(final_lo_, layout_.matrices[size_t(mi)].offset);
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
  M* dst = &shard_g_[b.own_lo];
  if (grads_in_t_) {
    // As T on the wire; widened back when waited for (optimizer_step), or
    // sharded, this rank's part as it arrives.
    T* wire = &wire_[b.lo];
    elementwise(KernelClass::Copy, 0, [&] { k_->narrow(&shard_g_[b.lo], wire, n); });
    if (!sharded()) {
      b.ticket = comm_.iall_reduce(Axis::D, wire, n);
      return;
    }
    b.ticket = comm_.ireduce_scatter_parts(Axis::D, static_cast<const T*>(wire), b.part_t.data(), n, [this, &b, dst] {
      elementwise(KernelClass::Copy, 0, [&] { k_->widen(b.part_t.data(), dst, b.part_t.size()); });
    });
    return;
  }
  if (!sharded()) {
    b.ticket = comm_.iall_reduce(Axis::D, &shard_g_[b.lo], n);
    return;
  }
  b.ticket = comm_.ireduce_scatter_parts(Axis::D, &shard_g_[b.lo], b.part.data(), n, [this, &b, dst] {
    const double bytes = double(b.part.size()) * sizeof(M);
    elementwise(KernelClass::Copy, 2 * bytes, [&] { k_->copy(b.part.data(), dst, size_t(bytes)); });
  });
}

// AdamW's traffic on n parameters: master, gradient, m and v read and
// written (8 values of M each), and the weight written where it is not the
// master (`w` non-null).
template <typename T>
double Gpt<T>::adamw_bytes(size_t n, const T* w) {
  return double(n) * (8.0 * sizeof(M) + (w ? sizeof(T) : 0));
}

// Σ g² over shard_g_[lo, hi), but the last stage's tied copy: its gradient
// is the first stage's embedding's, counted there.
template <typename T>
void Gpt<T>::shard_parts(size_t lo, size_t hi, std::vector<Part<M>>& parts) {
  size_t skip_lo = hi, skip_hi = hi;
  if (layout_.tied_copy >= 0) {
    const MatrixParam& c = layout_.matrices[size_t(layout_.tied_copy)];
    skip_lo = std::clamp(c.offset, lo, hi);
    skip_hi = std::clamp(c.offset + c.shard_n, lo, hi);
  }
  add_part(parts, shard_g_.data() + lo, skip_lo - lo);
  add_part(parts, shard_g_.data() + skip_hi, hi - skip_hi);
}

// Runs that continue the last one extend it: one rank's arenas are a part each.
template <typename T>
void Gpt<T>::add_part(std::vector<Part<M>>& parts, const M* x, size_t n) {
  if (n == 0) return;
  if (!parts.empty() && parts.back().x + parts.back().n == x) parts.back().n += n;
  else parts.push_back({x, n});
}

template <typename T>
double Gpt<T>::optimizer_step(const AdamW& opt) {
  allocate_grads();
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
      elementwise(KernelClass::Copy, 0, [&] {
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
    else elementwise(KernelClass::Optimizer, adamw_bytes(n, w), [&] { k_->adamw_update(master, g, m, v, w, n, s); });
  };
  auto adam_bucket = [&](const Bucket& b) {
    adam(shard_master(b.own_lo, b.moment), &shard_g_[b.own_lo], &shard_m_[b.moment], &shard_v_[b.moment],
         weight_copy(&shard_w_[b.own_lo]), b.own_hi - b.own_lo);
  };

  if (sp()) sum_norm_gradients();
  if (grads_in_t_) {
    // The replicated gradients as T over Z, then D (MODEL.md §13).
    T* wire = rep_wire();
    const size_t n = rep_g_.size();
    elementwise(KernelClass::Copy, 0, [&] { k_->narrow(rep_g_.data(), wire, n); });
    comm_.all_reduce(Axis::Z, wire, n);
    if (sharded()) {
      M* dst = &rep_g_[rep_lo_];
      comm_.wait(comm_.ireduce_scatter_parts(Axis::D, static_cast<const T*>(wire), rep_part_t_.data(), n, [&] {
        elementwise(KernelClass::Copy, 0, [&] { k_->widen(rep_part_t_.data(), dst, rep_part_t_.size()); });
      }));
    } else {
      comm_.all_reduce(Axis::D, wire, n);
      elementwise(KernelClass::Copy, 0, [&] { k_->widen(wire, rep_g_.data(), n); });
    }
  } else {
    comm_.all_reduce(Axis::Z, rep_g_.data(), rep_g_.size());
    if (sharded()) {
      M* dst = &rep_g_[rep_lo_];
      comm_.wait(comm_.ireduce_scatter_parts(Axis::D, rep_g_.data(), rep_part_.data(), rep_g_.size(), [&] {
        const double bytes = double(rep_part_.size()) * sizeof(M);
        elementwise(KernelClass::Copy, 2 * bytes, [&] { k_->copy(rep_part_.data(), dst, size_t(bytes)); });
      }));
    } else {
      comm_.all_reduce(Axis::D, rep_g_.data(), rep_g_.size());
    }
  }
  // The shard arena over D: what ODP has not posted yet, then each bucket
  // waited for in order; without ODP, sharding or offload, one blocking
  // all-reduce per matrix, as MODEL.md §2 prices it.
  const bool bucketed = c_.overlap.odp || sharded() || c_.offload;
  if (bucketed) {
    for (; next_bucket_ < buckets_.size(); ++next_bucket_) post_bucket(buckets_[next_bucket_]);
  } else {
    for (auto p = layout_.matrices.rbegin(); p != layout_.matrices.rend(); ++p) {
      if (!grads_in_t_) {
        comm_.all_reduce(Axis::D, &shard_g_[p->offset], p->shard_n);
        continue;
      }
      M* g = &shard_g_[p->offset];
      T* wire = &wire_[p->offset];
      elementwise(KernelClass::Copy, 0, [&] { k_->narrow(g, wire, p->shard_n); });
      comm_.all_reduce(Axis::D, wire, p->shard_n);
      elementwise(KernelClass::Copy, 0, [&] { k_->widen(wire, g, p->shard_n); });
    }
  }

  // Each value counted once: the D replicas hold the same reduced shard, so
  // each sums the squares of the part it owns (1/G_d of each bucket) rather
  // than replica 0 all of it while the others wait; replicated vectors by
  // one rank of their replicas. (Its traffic is in AdamW's count below: the
  // norm reads the gradients AdamW reads, as one fused clipping pass does.)
  // The squares in one pass over every part, one wait for the sum (a GPU's
  // squares and their sum: two kernels); per bucket where AdamW updates it
  // (and zeroes its gradient) as it arrives.
  const Coords& co = comm_.coords();
  const int gd = comm_.size(Axis::D), d = comm_.coord(Axis::D);
  double sq = 0;
  std::vector<Part<M>> parts;
  auto squares = [&] {
    if (parts.empty()) return;
    dev_.launch(Kernel{KernelClass::Optimizer, 0, 0, 2}, [&] { sq += k_->sum_of_squares(parts); });
    parts.clear();
  };
  for (const Bucket& b : buckets_) {
    comm_.wait(b.ticket);  // 0, nothing to wait for, where the reduction was blocking
    if (grads_in_t_ && bucketed && !sharded())
      elementwise(KernelClass::Copy, 0, [&] { k_->widen(&wire_[b.lo], &shard_g_[b.lo], b.hi - b.lo); });
    const size_t lo = sharded() ? b.own_lo : b.lo + part_begin(b.hi - b.lo, gd, d);
    const size_t hi = sharded() ? b.own_hi : b.lo + part_begin(b.hi - b.lo, gd, d + 1);
    shard_parts(lo, hi, parts);
    if (update_per_chunk) {
      squares();
      adam_bucket(b);
    }
  }
  // Sharded, the part of each vector this D rank holds reduced.
  Coords first = co;
  first[int(Axis::D)] = 0;
  for (const VectorParam& p : layout_.vectors) {
    const size_t lo = std::max(p.offset, rep_lo_), hi = std::min(p.offset + p.n, rep_hi_);
    if (owns_vector(p, sharded() ? first : co) && lo < hi) add_part(parts, &rep_g_[lo], hi - lo);
  }
  squares();
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
    elementwise(KernelClass::Copy, 0, [&] {
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
    elementwise(KernelClass::Optimizer, adamw_bytes(k, wk), [&] { k_->adamw_update(mw, g + lo, sl.m.data(), sl.v.data(), wk, k, s); });
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

// gpt.cpp instantiates the class; here only the members the rest of the
// engine calls (the others are instantiated by their use above), since a
// class may be explicitly instantiated once in a program.
#define FF_OPTIMIZER_MEMBERS(T)                   \
  template void Gpt<T>::build_buckets();         \
  template void Gpt<T>::gradient_done(int, bool); \
  template void Gpt<T>::post_ready_buckets();    \
  template double Gpt<T>::optimizer_step(const AdamW&);
FF_OPTIMIZER_MEMBERS(float)
FF_OPTIMIZER_MEMBERS(double)
FF_OPTIMIZER_MEMBERS(bf16)
#undef FF_OPTIMIZER_MEMBERS

}  // namespace ff::engine
