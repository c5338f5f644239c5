#pragma once
// Refitting a profile's few free parameters to measured training runs
// (MODEL.md §8): bandwidth per tier, latency, compute speed under the ranks' real
// sharing of the machine, and the overlap hiding factor. Least squares over
// the runs in log space, bounded: Levenberg–Marquardt to the nearest minimum,
// then Nelder–Mead across the model's kinks. Pure: the runs come in as
// structs, the fitted profile goes out as JSON.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/model/prediction.hpp"
#include "advisor/validation/validation_stats.hpp"

namespace ff {

// One measured run: the configuration and what the engine saw per step.
struct MeasuredRun {
  Config config;
  double time_s = 0;                 // per step
  double compute_s = 0;              // per step
  PerAxis<double> comm_s{};          // blocked per axis per step (P: a stage's messages and idle time)
  // The paced device's compute per step (the record's device_s, mean over
  // ranks); unset on the cpu device and in records from before it.
  std::optional<double> device_s;
};
// Every run on the paced device (each has device_s): compute is known by
// construction, so the refit holds its scales and the scores add the
// communication part.
bool paced(const std::vector<MeasuredRun>& runs);

enum class Knob { IntraBw, InterBw, Alpha, Gemm, Elementwise, Overlap, Nonblocking };
inline constexpr size_t kKnobCount = 7;
inline constexpr std::array<Knob, kKnobCount> kKnobs = {Knob::IntraBw, Knob::InterBw,     Knob::Alpha,
                                                        Knob::Gemm,    Knob::Elementwise, Knob::Overlap,
                                                        Knob::Nonblocking};
const char* knob_name(Knob k);  // "intra_bw_scale", …, "overlap_efficiency"

// Multipliers on the base profile, except overlap, which replaces
// overlap_efficiency. Gemm scales the peak FLOP/s (GEMMs and attention; the
// efficiency table stays within (0, 1]); Elementwise the memory bandwidth.
struct Factors {
  std::array<double, kKnobCount> v = {1, 1, 1, 1, 1, 0, 1};  // indexed by Knob
  double& operator[](Knob k) { return v[size_t(k)]; }
  double operator[](Knob k) const { return v[size_t(k)]; }
};
Factors identity_factors(const MachineProfile& base);  // all 1, overlap the base's
MachineProfile apply_factors(const MachineProfile& base, const Factors& f);

struct RefitResult {
  Factors factors;
  std::array<bool, kKnobCount> fitted{};             // false: held at its identity value
  std::array<bool, kKnobCount> at_bound{};           // a scale that ended at 1/100 or 100: the runs do not pin it
  std::array<std::string, kKnobCount> held_because;  // why, for a held knob
  double rms_before = 0, rms_after = 0;     // root mean square of log(predicted/measured time)
  int evaluations = 0;
};

// Fits the knobs the runs can tell apart (a knob no prediction depends on is
// held, e.g. inter-node bandwidth when no group crosses nodes) by minimising
// the mean of squared residuals: log(predicted/measured) time per step, and
// (predicted − measured)/measured time for compute and each axis' exposed
// communication (P's with the pipeline bubble, as the engine's stages count
// it). Throws InputError with no runs.
RefitResult refit(const Job& job, const MachineProfile& base, const std::vector<MeasuredRun>& runs);

// Out-of-sample scoring (MODEL.md §8): the runs split into halves by key
// (split_halves), a refit on each half scored on the other; `pooled` scores
// every run under the fit of the half it was not in. No run is ever scored
// by a fit that saw it. Throws InputError below 4 runs (2 to fit, 2 to score).
struct HalfScore {
  std::vector<size_t> fit_on, scored_on;  // indices into the runs
  RefitResult fit;
  Scores raw, fitted;                     // on scored_on: the base profile, the refitted one
};
struct OutOfSample {
  std::array<HalfScore, 2> halves;
  std::vector<double> raw, cross;  // per run: predicted by the base, by the other half's fit
  Scores pooled_raw, pooled_fitted;
};
OutOfSample out_of_sample(const Job& job, const MachineProfile& base, const std::vector<MeasuredRun>& runs,
                          const std::vector<std::string>& keys);

// {"factors": {knob: value}, "held": {knob: why}, "at_bound": [knob],
// "rms_log_time_error": {"before", "after"}} (in sample).
nlohmann::json fit_json(const RefitResult& r);

// The base profile JSON with the factors applied, loadable by
// machine_from_json, marked "kind": "fitted" with the factors and `source`
// (which report, which runs) under "fitted".
nlohmann::json fitted_profile_json(const nlohmann::json& base, const RefitResult& r, const std::string& name,
                                   const nlohmann::json& source);

}  // namespace ff
