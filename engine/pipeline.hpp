#pragma once
// One step of a pipeline stage (MODEL.md §9, AxoNN's first algorithm): each
// stage keeps one receive posted from each neighbour (tag = micro-batch), and
// sends complete in the background. A stage without tensor axes runs
// whichever message arrives first, as AxoNN did, preferring a backward when
// both are there (it retires a micro-batch, frees its activations and lets
// the first stage inject the next); a stage with tensor axes must issue the
// same collectives in the same order on all its ranks, so it follows the
// static 1F1B order computed from micro-batch ids and waits only for that
// operation's message. Micro-batches are forwarded and backwarded in id order
// on every stage whatever the timing, so gradients accumulate in one order.
#include <functional>
#include <vector>

#include "engine/comm.hpp"
#include "engine/gpt.hpp"

namespace ff::engine {

// Stage s of P, M micro-batches: true for a forward (on the last stage with
// its backward), false for a backward. At most P − s in flight (PipeDream's
// 1F1B with a flush).
std::vector<bool> static_order(int P, int s, long M);

template <typename T>
class PipelineStage {
 public:
  // `tokens_of(i, buf)` fills micro-batch i's sequences (S + 1 tokens each).
  using TokensOf = std::function<void(long, int*)>;
  PipelineStage(Gpt<T>& model, Comm& comm, long micro_steps, size_t tokens_per_micro);
  // Every micro-batch of one step through this stage; returns the sum of
  // its token losses (the last stage's; 0 elsewhere).
  double step(const TokensOf& tokens_of, master_t<T> grad_scale);

 private:
  void forward(long i, const TokensOf& tokens_of, master_t<T> grad_scale);
  void backward(long i);
  void send(std::vector<Comm::Ticket>& pending, long i, const T* buf, int peer);

  Gpt<T>& model_;
  Comm& comm_;
  long M_;
  int P_, s_;
  bool first_, last_, arrival_order_;
  Buffer<T> fwd_in_, bwd_in_;  // the device's: a GPU receives into them
  std::vector<std::vector<int>> tokens_;  // per slot
  std::vector<Comm::Ticket> fwd_sent_, bwd_sent_;  // per slot: the send still reading its buffer
  Comm::Ticket fwd_recv_ = 0, bwd_recv_ = 0;
  double loss_ = 0;
};

}  // namespace ff::engine
