#pragma once
// The engine's own training step on a one-rank grid, every rank running its
// own replica at once. CPU ranks spend much of a step outside GEMM (softmax
// exponentials, GELU, LayerNorm, AdamW) at a rate set by instructions, not
// by a stream triad's bandwidth; calibrate fits the profile's element-wise
// efficiency to this step rather than assuming it.
#include <string>

#include "advisor/core/measurement.hpp"
#include "advisor/core/model_spec.hpp"

namespace ff::measure {

// Why the step cannot be timed here ("" when it can): the model must fit in
// `memory_per_rank` bytes, and `steps` steps must take under about a minute
// at `gemm_flops_per_s` per rank (0: not known, no limit).
std::string engine_step_problem(const ff::ModelSpec& model, int micro_batch, int steps, double memory_per_rank,
                                double gemm_flops_per_s);

// `steps` steps of `micro_batch` sequences, fp32, no recompute; per step the
// mean over ranks of the engine's compute and GEMM time. Collective over
// MPI_COMM_WORLD.
ff::EngineStepSample measure_engine_step(const ff::ModelSpec& model, int micro_batch, int steps);

}  // namespace ff::measure
