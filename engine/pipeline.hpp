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
//
// Interleaved (v > 1 model chunks per stage, MODEL.md §9): Megatron-LM's
// order on every stage, static whatever the tensor axes (interleaved_order).
// Messages run virtual stage k → k + 1, so the last stage's chunk c feeds
// the first stage's chunk c + 1; each is tagged with its direction, the
// receiving chunk and the micro-batch (stage_tag). An activation slot holds
// one (chunk, micro-batch) from its forward to its backward.
#include <functional>
#include <vector>

#include "engine/comm.hpp"
#include "engine/gpt.hpp"

namespace ff::engine {

// Stage s of P, M micro-batches: true for a forward (on the last stage with
// its backward), false for a backward. At most P − s in flight (PipeDream's
// 1F1B with a flush).
std::vector<bool> static_order(int P, int s, long M);

// One operation of the interleaved schedule.
struct ChunkOp {
  bool forward = true;
  int chunk = 0;
  long micro = 0;
};
// Stage s of P with v chunks, M micro-batches (a multiple of P): Megatron's
// forward_backward_pipelining_with_interleaving. Warm-up of
// min(M·v, 2(P − s − 1) + (v − 1)·P) forwards (all M·v where M = P), then one
// forward and one backward alternating, then the remaining backwards.
// Forward k is chunk (k / P) mod v of micro-batch (k / (P·v))·P + k mod P,
// backward k the same micro-batch in chunk v − 1 − (k / P) mod v.
std::vector<ChunkOp> interleaved_order(int P, int s, int v, long M);
// The (chunk, micro-batch) pairs in flight at most on stage s: activation slots.
size_t interleaved_slots(int P, int s, int v, long M);
// A stage message's MPI tag: direction (activation or gradient), the chunk
// that receives it, the micro-batch. Below 2·v·M, which micro_steps_of keeps
// under the tied embeddings' tag (32767).
int stage_tag(bool gradient, int chunk, long micro, int v, long M);

template <typename T>
class PipelineStage {
 public:
  // `tokens_of(i, buf)` fills micro-batch i's sequences (S + 1 tokens each).
  using TokensOf = std::function<void(long, int*)>;
  PipelineStage(Gpt<T>& model, Comm& comm, long micro_steps, size_t tokens_per_micro, int virtual_stages = 1);
  // Every micro-batch of one step through this stage; returns the sum of
  // its token losses (the last stage's; 0 elsewhere).
  double step(const TokensOf& tokens_of, master_t<T> grad_scale);

 private:
  void forward(long i, const TokensOf& tokens_of, master_t<T> grad_scale);
  void backward(long i);
  void send(std::vector<Comm::Ticket>& pending, long i, const T* buf, int peer);
  // The interleaved schedule (v_ > 1).
  double step_interleaved(const TokensOf& tokens_of, master_t<T> grad_scale);
  void forward_chunk(const ChunkOp& op, const TokensOf& tokens_of, master_t<T> grad_scale);
  void backward_chunk(const ChunkOp& op);
  void post_next_recv(bool gradient);

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
  int v_ = 1;
  std::vector<ChunkOp> order_;
  // The messages this stage receives, in the order it uses them (the order
  // its neighbour sends them), per direction, and the next to post.
  std::vector<ChunkOp> recv_seq_[2];
  size_t recv_next_[2] = {0, 0};
  std::vector<int> slot_of_;  // [chunk·M + micro]
  std::vector<int> free_slots_;
};

}  // namespace ff::engine
