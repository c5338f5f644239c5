#include "engine/pipeline.hpp"

#include <algorithm>

#include "advisor/core/job.hpp"

namespace ff::engine {

std::vector<bool> static_order(int P, int s, long M) {
  std::vector<bool> ops;
  if (s == P - 1) return std::vector<bool>(size_t(M), true);
  const long warmup = std::min(long(P - s - 1), M);
  for (long i = 0; i < warmup; ++i) ops.push_back(true);
  for (long i = warmup; i < M; ++i) {
    ops.push_back(true);
    ops.push_back(false);
  }
  for (long i = 0; i < warmup; ++i) ops.push_back(false);
  return ops;
}

std::vector<ChunkOp> interleaved_order(int P, int s, int v, long M) {
  const long total = M * v;
  const long warmup = long(interleaved_warmup(P, s, v, M));
  auto op = [&](long k, bool forward) {
    const int c = int((k / P) % v);
    return ChunkOp{forward, forward ? c : v - 1 - c, (k / (long(P) * v)) * P + k % P};
  };
  std::vector<ChunkOp> ops;
  for (long k = 0; k < warmup; ++k) ops.push_back(op(k, true));
  for (long k = 0; k < total - warmup; ++k) {
    ops.push_back(op(warmup + k, true));
    ops.push_back(op(k, false));
  }
  for (long k = total - warmup; k < total; ++k) ops.push_back(op(k, false));
  return ops;
}

size_t interleaved_slots(int P, int s, int v, long M) {
  long live = 0, most = 0;
  for (const ChunkOp& op : interleaved_order(P, s, v, M)) most = std::max(most, live += op.forward ? 1 : -1);
  return size_t(most);
}

int stage_tag(bool gradient, int chunk, long micro, int v, long M) {
  return int(((gradient ? v : 0) + chunk) * M + micro);
}

template <typename T>
PipelineStage<T>::PipelineStage(Gpt<T>& model, Comm& comm, long micro_steps, size_t tokens_per_micro,
                                int virtual_stages)
    : model_(model), comm_(comm), M_(micro_steps), P_(comm.size(Axis::P)), s_(comm.coord(Axis::P)),
      v_(virtual_stages) {
  first_ = s_ == 0;
  last_ = s_ == P_ - 1;
  arrival_order_ = comm.size(Axis::X) * comm.size(Axis::Y) * comm.size(Axis::Z) == 1;
  fwd_in_.assign(model.message_elements(), T(0));
  bwd_in_.assign(model.message_elements(), T(0));
  size_t slots = size_t(P_);
  if (v_ > 1) {
    order_ = interleaved_order(P_, s_, v_, M_);
    slots = interleaved_slots(P_, s_, v_, M_);
    // Virtual stage k's input comes from k − 1, its gradient from k + 1: all
    // but the model's two ends, in this stage's order, which is its
    // neighbours' sending order (every stage runs the same sequence of
    // (chunk, micro-batch), the wrap from the last stage to the first
    // shifting the chunk by one).
    for (const ChunkOp& op : order_) {
      if (op.forward && !(first_ && op.chunk == 0)) recv_seq_[0].push_back(op);
      if (!op.forward && !(last_ && op.chunk == v_ - 1)) recv_seq_[1].push_back(op);
    }
    slot_of_.assign(size_t(v_) * size_t(M_), -1);
  }
  tokens_.assign(slots, std::vector<int>(tokens_per_micro));
  fwd_sent_.assign(slots, 0);
  bwd_sent_.assign(slots, 0);
}

// A slot's buffer is written again P micro-batches later: its send must be over.
template <typename T>
void PipelineStage<T>::send(std::vector<Comm::Ticket>& pending, long i, const T* buf, int peer) {
  Comm::Ticket& t = pending[size_t(i % P_)];
  t = comm_.isend(Axis::P, peer, buf, model_.message_elements(), int(i));
}

template <typename T>
void PipelineStage<T>::forward(long i, const TokensOf& tokens_of, master_t<T> grad_scale) {
  const int slot = int(i % P_);
  int* tokens = tokens_[size_t(slot)].data();
  if (first_ || last_) tokens_of(i, tokens);
  if (!first_) comm_.wait_one(fwd_recv_);
  comm_.wait_one(fwd_sent_[size_t(slot)]);
  model_.forward(slot, first_ ? nullptr : fwd_in_.data(), tokens);
  if (!first_ && i + 1 < M_) fwd_recv_ = comm_.irecv(Axis::P, s_ - 1, fwd_in_.data(), fwd_in_.size(), int(i + 1));
  if (last_) {
    loss_ += model_.head(tokens, grad_scale, i + 1 == M_);
    backward(i);
  } else {
    send(fwd_sent_, i, model_.output(slot), s_ + 1);
  }
}

template <typename T>
void PipelineStage<T>::backward(long i) {
  const int slot = int(i % P_);
  if (!last_) comm_.wait_one(bwd_recv_);
  comm_.wait_one(bwd_sent_[size_t(slot)]);
  model_.backward(slot, last_ ? nullptr : bwd_in_.data(), tokens_[size_t(slot)].data(), i + 1 == M_);
  if (!last_ && i + 1 < M_) bwd_recv_ = comm_.irecv(Axis::P, s_ + 1, bwd_in_.data(), bwd_in_.size(), int(i + 1));
  if (!first_) send(bwd_sent_, i, model_.input_grad(slot), s_ - 1);
}

template <typename T>
void PipelineStage<T>::post_next_recv(bool gradient) {
  Comm::Ticket& t = gradient ? bwd_recv_ : fwd_recv_;
  const std::vector<ChunkOp>& seq = recv_seq_[gradient];
  size_t& next = recv_next_[gradient];
  t = 0;
  if (next == seq.size()) return;
  const ChunkOp& op = seq[next++];
  const int peer = gradient ? (s_ + 1) % P_ : (s_ + P_ - 1) % P_;
  Buffer<T>& buf = gradient ? bwd_in_ : fwd_in_;
  t = comm_.irecv(Axis::P, peer, buf.data(), buf.size(), stage_tag(gradient, op.chunk, op.micro, v_, M_));
}

template <typename T>
void PipelineStage<T>::forward_chunk(const ChunkOp& op, const TokensOf& tokens_of, master_t<T> grad_scale) {
  const int c = op.chunk;
  const long i = op.micro;
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  slot_of_[size_t(c) * size_t(M_) + size_t(i)] = slot;
  const bool embeds = first_ && c == 0, heads = last_ && c == v_ - 1;
  int* tokens = tokens_[size_t(slot)].data();
  if (embeds || heads) tokens_of(i, tokens);
  if (!embeds) comm_.wait_one(fwd_recv_);
  comm_.wait_one(fwd_sent_[size_t(slot)]);
  model_.forward(slot, embeds ? nullptr : fwd_in_.data(), tokens, c);
  if (!embeds) post_next_recv(false);
  if (heads) {
    // The loss and the head's backward now; the chunk's backward from this
    // gradient, kept in the slot's gradient buffer, where the schedule says.
    comm_.wait_one(bwd_sent_[size_t(slot)]);
    loss_ += model_.head(tokens, grad_scale, i + 1 == M_);
    model_.keep_output_grad(slot);
    return;
  }
  const bool wrap = s_ == P_ - 1;  // to the first stage's next chunk
  fwd_sent_[size_t(slot)] = comm_.isend(Axis::P, wrap ? 0 : s_ + 1, model_.output(slot), model_.message_elements(),
                                        stage_tag(false, wrap ? c + 1 : c, i, v_, M_));
}

template <typename T>
void PipelineStage<T>::backward_chunk(const ChunkOp& op) {
  const int c = op.chunk;
  const long i = op.micro;
  const int slot = slot_of_[size_t(c) * size_t(M_) + size_t(i)];
  const bool embeds = first_ && c == 0, heads = last_ && c == v_ - 1;
  if (!heads) {
    comm_.wait_one(bwd_recv_);
    comm_.wait_one(bwd_sent_[size_t(slot)]);
  }
  model_.backward(slot, heads ? model_.input_grad(slot) : bwd_in_.data(), tokens_[size_t(slot)].data(), i + 1 == M_,
                  c);
  if (!heads) post_next_recv(true);
  if (!embeds) {
    const bool wrap = s_ == 0;  // to the last stage's previous chunk
    bwd_sent_[size_t(slot)] = comm_.isend(Axis::P, wrap ? P_ - 1 : s_ - 1, model_.input_grad(slot),
                                          model_.message_elements(), stage_tag(true, wrap ? c - 1 : c, i, v_, M_));
  }
  free_slots_.push_back(slot);
}

template <typename T>
double PipelineStage<T>::step_interleaved(const TokensOf& tokens_of, master_t<T> grad_scale) {
  loss_ = 0;
  free_slots_.clear();
  for (size_t k = fwd_sent_.size(); k-- > 0;) free_slots_.push_back(int(k));  // slot 0 first
  recv_next_[0] = recv_next_[1] = 0;
  post_next_recv(false);
  post_next_recv(true);
  std::vector<bool> forwards;
  std::vector<int> chunks;
  for (const ChunkOp& op : order_) forwards.push_back(op.forward), chunks.push_back(op.chunk);
  model_.begin_step(forwards, chunks);
  for (const ChunkOp& op : order_) op.forward ? forward_chunk(op, tokens_of, grad_scale) : backward_chunk(op);
  for (auto* sent : {&fwd_sent_, &bwd_sent_})
    for (Comm::Ticket& t : *sent) comm_.wait_one(t), t = 0;
  model_.end_step();
  return loss_;
}

template <typename T>
double PipelineStage<T>::step(const TokensOf& tokens_of, master_t<T> grad_scale) {
  if (v_ > 1) return step_interleaved(tokens_of, grad_scale);
  loss_ = 0;
  if (!first_) fwd_recv_ = comm_.irecv(Axis::P, s_ - 1, fwd_in_.data(), fwd_in_.size(), 0);
  if (!last_) bwd_recv_ = comm_.irecv(Axis::P, s_ + 1, bwd_in_.data(), bwd_in_.size(), 0);
  long next_f = 0, next_b = 0;
  if (!arrival_order_ || last_) {
    const std::vector<bool> ops = static_order(P_, s_, M_);
    model_.begin_step(ops);
    for (bool f : ops) f ? forward(next_f++, tokens_of, grad_scale) : backward(next_b++);
  } else {
    model_.begin_step({});  // no tensor axes: no weight is gathered, no schedule to keep
    while (next_b < M_) {
      // The first stage injects while fewer than P are in flight; the others
      // run what has arrived, a backward first.
      if (first_ && next_f < M_ && next_f - next_b < P_) {
        forward(next_f++, tokens_of, grad_scale);
        continue;
      }
      const bool can_b = next_b < next_f, can_f = !first_ && next_f < M_;
      const size_t got = comm_.wait_any({can_b ? bwd_recv_ : 0, can_f ? fwd_recv_ : 0});
      got == 0 ? backward(next_b++) : forward(next_f++, tokens_of, grad_scale);
    }
  }
  for (auto* sent : {&fwd_sent_, &bwd_sent_})
    for (Comm::Ticket& t : *sent) comm_.wait_one(t), t = 0;
  model_.end_step();
  return loss_;
}

template class PipelineStage<float>;
template class PipelineStage<double>;
template class PipelineStage<bf16>;

}  // namespace ff::engine
