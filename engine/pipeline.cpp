#include "engine/pipeline.hpp"

#include <algorithm>

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

template <typename T>
PipelineStage<T>::PipelineStage(Gpt<T>& model, Comm& comm, long micro_steps, size_t tokens_per_micro)
    : model_(model), comm_(comm), M_(micro_steps), P_(comm.size(Axis::P)), s_(comm.coord(Axis::P)) {
  first_ = s_ == 0;
  last_ = s_ == P_ - 1;
  arrival_order_ = comm.size(Axis::X) * comm.size(Axis::Y) * comm.size(Axis::Z) == 1;
  fwd_in_.assign(model.message_elements(), T(0));
  bwd_in_.assign(model.message_elements(), T(0));
  tokens_.assign(size_t(P_), std::vector<int>(tokens_per_micro));
  fwd_sent_.assign(size_t(P_), 0);
  bwd_sent_.assign(size_t(P_), 0);
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
double PipelineStage<T>::step(const TokensOf& tokens_of, master_t<T> grad_scale) {
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
