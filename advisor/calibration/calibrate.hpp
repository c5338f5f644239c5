#pragma once
// Fitting a machine profile from measurements (MODEL.md §2, §5): α and busbw
// per collective geometry, the GEMM efficiency table, and the profile JSON
// that holds them. Pure functions; reading files is the caller's business,
// except profile_json, which resolves a --base name or file.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/core/machine_profile.hpp"
#include "advisor/core/measurement.hpp"
#include "advisor/model/comm_model.hpp"

namespace ff {

struct LinkFit {
  LinkParams link;
  double rel_rms = 0;  // sqrt(mean(((model − t)/t)²)) over the points
  int points = 0;
  // One collective's median time at each size (bytes ascending): the curve a
  // table entry's by_op carries for the advisor to interpolate.
  std::vector<std::pair<double, double>> curve;
  std::string note;  // set where the data forced a bound (times that do not grow with size)
};

// Least squares of the ring α-β model t = α·steps + factor·bytes/busbw
// (steps 2(g−1) all-reduce, g−1 otherwise; factor = steps/g) weighted by
// relative error, with α >= 0. `seconds[i]` is the time of `bytes[i]`.
// Throws InputError on fewer than 2 points, non-positive data or a group of
// size < 2. Times that do not grow with size get the best bandwidth measured
// (a lower bound) and the α the rest leaves, with a note saying so.
LinkFit fit_link(Coll op, int group_size, const std::vector<double>& bytes, const std::vector<double>& seconds);
// The same fit over samples of one geometry, any mix of collectives, each
// point its median time: one (α, busbw) that prices all three, as the
// advisor does.
LinkFit fit_link(const std::vector<CollectiveSample>& samples);

// Rings across nodes measured at several group sizes (spans), fitted as one
// link (MODEL.md §2, "Rings at scale"): t = call + min over two protocols of
// α_p·steps + factor·bytes/β_p, the small-chunk one (NCCL's LL) at a
// fitted share of the bandwidth where at least 3 points run it (else
// half); link.call_s, alpha_s, ll_alpha_s (0: one
// protocol fits best), ll_bw_fraction and busbw. Blocking samples of any
// collectives, each at its median time. Throws InputError on fewer than 3
// samples or a single span.
LinkFit fit_rings_at_scale(const std::vector<CollectiveSample>& samples);

// A flash-attention kernel's rate at several sequence lengths (FLOP/s of
// forward and backward together, FlashAttention's benchmark convention),
// fitted as MODEL.md §2's curve: 1/rate = 1/r_max + (half_seq/r_max)/S by
// least squares of relative error; efficiency_max = r_max / peak. Throws
// InputError on fewer than 2 lengths or rates that fit no positive curve.
AttentionCurve fit_attention_curve(const std::vector<double>& seq, const std::vector<double>& flops_per_s,
                                   double peak_flops, int head_dim, bool causal);

// A low-precision GEMM's rate at several shapes (achieved FLOP/s of
// 2mnk, each against its GPU's peak), fitted as MODEL.md §2's form
// t = 2mnk / (efficiency_max · peak) + fixed by least squares of relative
// error. Throws InputError on fewer than 2 shapes or rates that fit no
// efficiency at or below 1 with fixed >= 0.
struct GemmRatePoint {
  double m, n, k;
  double flops_per_s;  // achieved
  double peak_flops;   // the GPU's datasheet peak for the dtype
};
GemmRate fit_gemm_rate(const std::vector<GemmRatePoint>& points);

// A pair exchanging one message each way at once, all samples of one
// geometry: least squares of t = α + bytes/bw on the median times, relative
// error, α >= 0, as the collectives (the same code: a one-step "ring" of
// factor 1). `link.busbw` holds bw, each way.
LinkFit fit_p2p(const std::vector<P2PSample>& samples);
// One direction and concurrency of the host link: t = α + bytes/bw likewise.
LinkFit fit_host_link(const std::vector<HostLinkSample>& samples);

// One scattered GEMM measurement: efficiency = achieved / peak.
struct GemmPoint {
  double m = 0, n = 0, k = 0, eff = 0;
};
// The profile's efficiency grid filled from scattered points: each cell is
// the inverse-distance-squared weighted mean of the points in log2 space
// (a point on the cell takes it), clamped to [1e-3, 1]. Returns [m][n][k]
// row-major like GemmTable::eff.
std::vector<double> fit_gemm_grid(const std::vector<double>& m, const std::vector<double>& n,
                                  const std::vector<double>& k, const std::vector<GemmPoint>& points);

// A complete profile (profiles/README.md): the sections `m` covers are fitted
// and marked "kind": "measured" (pairs into "p2p", the host link and host
// memory into "host"); the rest come from `base` (a profile JSON),
// or, when `base` is null, from stated CPU-rank assumptions marked nominal.
// The measurement is kept in "raw". Throws InputError if the result would not
// load (machine_from_json) or the measurement is unusable.
nlohmann::json calibrate_profile(const nlohmann::json& base, const Measurement& m, const std::string& name);
// Every fit of a profile that had to bound its figures, as "path: note"
// (e.g. intra_node.table[0].by_op.all-reduce), for the tools to say so.
std::vector<std::string> fit_notes(const nlohmann::json& profile);

// A bundled profile name or a profile file, as JSON (for --base).
nlohmann::json profile_json(const std::string& name_or_file);

}  // namespace ff
