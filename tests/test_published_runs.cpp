// Published runs (MODEL.md §8, "Published runs"): measured training runs from
// four sources, each typed into the model by one rule per source and priced
// with no parameter of its own. The table, with its sources and what was
// inferred, is tests/fixtures/published_runs.json; the rules:
//
// * MosaicML llm-foundry (FSDP FULL_SHARD; H100 on dgx-h100, A100 on
//   dgx-a100 with the 40 GB part's HBM where the row ran it): the shards are
//   the Z axis over every GPU (G_z = GPUs), prefetched all-gathers and
//   overlapped reduce-scatters (OAG, ORS), PyTorch kernels (unfused); the
//   measured time is the batch's tokens over the published tokens/s.
// * Megatron-LM SC'21, Table 1 (Selene, dgx-a100): TP on Y, PP stages
//   (interleaved where the script sets it), DP; fp16, full recompute,
//   unfused attention with dropout (2021: no flash), fused kernels, blocking
//   stage messages and TP all-reduces; ODP where the script runs PyTorch's
//   DDP ("torch"), none under Megatron's "local" DDP, which reduces after
//   the backward. Measured time = Narayanan's FLOPs with the recomputed
//   forward / published FLOP/s.
// * Korthikanti et al. (Selene, dgx-a100): TP 8 with sequence parallelism,
//   selective recompute, PP, one data-parallel rank, micro-batch 1, fp16,
//   blocking stage messages, no interleaving (not published); the published
//   iteration time.
// * Megatron-LM's README, H100 weak scaling (dgx-h100): TP on Y with sequence
//   parallelism, PP stages, DP; micro-batch 1, no recompute, the distributed
//   optimizer (ZeRO-1),
//   the TP all-reduce under the weight-gradient GEMM and the gradients'
//   reduction under the backward (OAR, ODP), Transformer Engine's TP overlap
//   with sequence parallelism (OTP: the runs pass --tp-comm-overlap); fused
//   kernels; stage messages blocking (Megatron's 1F1B). Measured time =
//   model FLOPs (Narayanan et al.'s count, no recompute) / published FLOP/s.
// * AxoNN IPDPS'22 (Summit, fp16, 512-token sequences, unfused attention
//   with dropout, full recompute): AxoNN's pipelines with its optimizer
//   state in host memory and the data-parallel reduction overlapped
//   (offload, ODP); its Megatron-LM baselines as published (no overlap),
//   its DeepSpeed baselines with ZeRO-1, both with blocking stage messages
//   (Megatron's 1F1B, DeepSpeed's pipeline engine); AxoNN keeps fp16 gradients (4 bytes
//   a parameter on the GPU under offload). Measured time = Narayanan's FLOPs
//   with the recomputed forward / published FLOP/s.
// * AxoNN SC'24 (Perlmutter, Frontier, Alps): the 4D grids are not
//   published (the runs took one of the performance model's top picks), so
//   the rows with a published batch are priced at `recommend`'s best with
//   recompute on and no stages; FLOPs as above.
//
// Rows of other machines (Jean Zay), and Selene's rows whose micro-batch and
// recompute are not published (MT-NLG), are left out.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/core/measurement.hpp"
#include "advisor/model/search.hpp"
#include "tests/helpers.hpp"

using namespace ff;

namespace {

struct Priced {
  std::string id, family, source;
  double measured_s = 0, predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1; }
};

bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Narayanan et al.'s FLOPs of one iteration (F = 4H, attention non-causal):
// 72·B·S·L·H²·(1 + S/(6H) + V/(12·L·H)), or with the recomputed forward
// 96·B·S·L·H²·(1 + S/(6H) + V/(16·L·H)).
double narayanan_flops(const ModelSpec& m, double B, bool recompute) {
  const double S = m.seq_len, L = m.layers, H = m.hidden, V = m.vocab;
  if (recompute) return 96 * B * S * L * H * H * (1 + S / (6 * H) + V / (16 * L * H));
  return 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H));
}

// Megatron pads the vocabulary to a multiple of 128 · TP, so each tensor-
// parallel rank holds whole 128-row blocks.
ModelSpec model_of(const nlohmann::json& r, bool unfused_attention) {
  const nlohmann::json& m = r.at("model");
  const long long tp = r.at("tensor_parallel").is_number() ? r.at("tensor_parallel").get<long long>() : 1;
  const long long V = m.at("vocab"), block = 128 * tp;
  nlohmann::json spec = {{"name", r.at("id")},     {"layers", m.at("layers")},      {"hidden", m.at("hidden")},
                         {"heads", m.at("heads")}, {"vocab", V},                    {"seq_len", m.at("seq_len")},
                         {"padded_vocab", (V + block - 1) / block * block}};
  if (unfused_attention) spec["attention"] = "unfused", spec["attention_dropout"] = true;
  return model_from_json(spec, "published_runs.json");
}

double price(const Job& job, const MachineProfile& machine, const Config& c) {
  return predict_estimate(job, machine, c).time_s;
}
double price(const Job& job, const char* machine, const Config& c) { return price(job, load_machine(machine), c); }

// A DGX A100 node as the row's GPU has it: the 40 GB part's HBM (NVIDIA A100
// datasheet, SXM4 40 GB: 1,555 GB/s); the rest of the machine the same.
MachineProfile dgx_a100(const std::string& gpu) {
  MachineProfile m = load_machine("dgx-a100");
  if (gpu == "A100-40GB") m.hbm_bandwidth = 1555e9, m.hbm_capacity = 40.0 * 1073741824;
  return m;
}

// Megatron-style rows: TP on Y, PP stages, DP.
Grid tp_pp_dp(const nlohmann::json& r) {
  return Grid{1, r.at("tensor_parallel"), 1, r.at("data_parallel"), r.at("pipeline_parallel")};
}

// A row whose source publishes FLOP/s per GPU: the time that many FLOPs take.
double time_from_tflops(const Job& job, const nlohmann::json& meas, bool recompute) {
  const double tflops = meas.at("tflops_per_gpu");
  return narayanan_flops(job.model, double(job.batch), recompute) / (tflops * 1e12 * double(job.gpus));
}

std::vector<Priced> price_published_runs() {
  std::ifstream in(fftest::fixture("published_runs.json"));
  const nlohmann::json table = nlohmann::json::parse(in);
  std::vector<Priced> out;
  for (const nlohmann::json& r : table.at("rows")) {
    const std::string id = r.at("id");
    const long long G = r.at("gpus");
    const nlohmann::json& meas = r.at("measured");
    Priced p{id, r.at("family"), "", 0, 0};
    Job job;
    job.gpus = G;
    job.batch = r.at("global_batch_sequences").is_number() ? r.at("global_batch_sequences").get<long long>() : 0;
    Config c;
    if (starts(id, "zero3-mosaic-")) {
      p.source = "MosaicML";
      job.model = model_of(r, false);
      job.fusion = Fusion::Unfused;
      c.grid = Grid{1, 1, int(G), 1};
      c.micro_batch = r.at("micro_batch");
      c.recompute = parse_recompute(r.at("recompute"));
      c.overlap.oag = c.overlap.ors = true;
      p.measured_s = meas.at("iteration_s");
      p.predicted_s = starts(id, "zero3-mosaic-h100-") ? price(job, "dgx-h100", c) : price(job, dgx_a100(r.at("gpu")), c);
    } else if (starts(id, "megatron-sc21-") ||
               (starts(id, "megatron-korthikanti-") && meas.at("iteration_s").is_number())) {
      // Megatron-LM on Selene, both sources: fp16, unfused attention, TP/PP/DP,
      // Megatron's blocking 1F1B.
      const bool sc21 = starts(id, "megatron-sc21-");
      p.source = sc21 ? "Megatron-LM SC'21" : "Korthikanti et al.";
      job.model = model_of(r, true);
      job.dtype = c.dtype = Dtype::FP16;
      c.grid = tp_pp_dp(r);
      c.micro_batch = r.at("micro_batch");
      job.blocking_messages = true;
      if (sc21) {
        c.virtual_stages = r.at("virtual_stages");
        c.recompute = Recompute::Full;
        c.overlap.odp = r.at("ddp") == "torch";
        p.measured_s = time_from_tflops(job, meas, true);
      } else {
        c.recompute = Recompute::Selective;
        c.sequence_parallel = true;
        p.measured_s = meas.at("iteration_s");
      }
      p.predicted_s = price(job, dgx_a100(r.at("gpu")), c);
    } else if (starts(id, "megatron-readme-h100-")) {
      p.source = "Megatron-LM README";
      job.model = model_of(r, false);
      c.grid = tp_pp_dp(r);
      c.overlap.oar = c.overlap.odp = true;
      c.shard_optimizer = true;
      c.sequence_parallel = c.overlap.otp = c.grid.y > 1;
      job.blocking_messages = true;
      p.measured_s = time_from_tflops(job, meas, false);
      p.predicted_s = price(job, "dgx-h100", c);
    } else if (starts(id, "axonn-ipdps22-summit-") || starts(id, "megatron-ipdps22-summit-")) {
      p.source = "AxoNN IPDPS'22";
      job.model = model_of(r, true);
      job.dtype = c.dtype = Dtype::FP16;
      c.grid = tp_pp_dp(r);
      c.micro_batch = r.at("micro_batch");
      c.recompute = Recompute::Full;
      if (starts(id, "axonn")) c.offload = c.overlap.odp = true, job.grad_dtype = Dtype::FP16;
      else job.blocking_messages = true;
      if (r.at("zero_stage") == 1) c.shard_optimizer = true;
      p.measured_s = time_from_tflops(job, meas, true);
      p.predicted_s = price(job, "summit", c);
    } else if (starts(id, "axonn-sc24-") && r.at("global_batch_sequences").is_number()) {
      p.source = "AxoNN SC'24";
      const std::string machine = r.at("machine");
      // The AxoNN papers' GPT family (MODEL.md §4), by its shape.
      for (const ModelSpec& m : preset_models())
        if (m.layers == r.at("model").at("layers") && m.hidden == r.at("model").at("hidden")) job.model = m;
      REQUIRE(job.model.layers > 0);
      SearchOptions opt;
      opt.recompute = {Recompute::Full};
      opt.pipelines = {1};
      opt.offload_on = false;
      // AxoNN's own tensor parallelism (X, Y, Z): Megatron's sequence
      // parallelism, and Transformer Engine's overlap that comes with it,
      // are not what these runs used.
      opt.sequence_parallel_on = false;
      opt.top = 1;
      const MachineProfile prof = load_machine(machine);
      const SearchResult s = search(job, prof, opt);
      REQUIRE(!s.top.empty());
      p.measured_s = time_from_tflops(job, meas, true);
      p.predicted_s = s.top.front().estimate.time_s;
    } else {
      continue;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

// One global factor on every prediction (what no published kernel rate
// explains: clocks under load, data loading, framework overheads), fitted as
// a geometric mean of measured / predicted on one half of the rows and
// applied to the other: two folds of alternate rows, so every row is scored
// out of sample. Returns each row's error under the other fold's factor.
std::vector<double> two_fold_errors(const std::vector<Priced>& runs, double factor[2]) {
  for (int fold = 0; fold < 2; ++fold) {
    double log_sum = 0;
    int n = 0;
    for (size_t i = fold; i < runs.size(); i += 2) log_sum += std::log(runs[i].measured_s / runs[i].predicted_s), ++n;
    factor[fold] = std::exp(log_sum / n);
  }
  std::vector<double> err(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) err[i] = factor[1 - i % 2] * runs[i].predicted_s / runs[i].measured_s - 1;
  return err;
}

TEST_CASE("published runs: priced with no per-run parameter") {
  const std::vector<Priced> runs = price_published_runs();
  double factor[2];
  const std::vector<double> held = two_fold_errors(runs, factor);
  std::map<std::string, std::vector<double>> abs_by_family, signed_by_family, held_abs, held_signed;
  std::map<std::string, int> by_source;
  std::string table;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Priced& p = runs[i];
    CHECK(std::isfinite(p.predicted_s));
    CHECK(p.predicted_s > 0);
    abs_by_family[p.family].push_back(std::abs(p.error()));
    signed_by_family[p.family].push_back(p.error());
    held_abs[p.family].push_back(std::abs(held[i]));
    held_signed[p.family].push_back(held[i]);
    ++by_source[p.source];
    char line[200];
    std::snprintf(line, sizeof line, "%-44s %-9s %10.3f %10.3f %+7.1f%% %+7.1f%%\n", p.id.c_str(), p.family.c_str(),
                  p.measured_s, p.predicted_s, 100 * p.error(), 100 * held[i]);
    table += line;
  }
  MESSAGE("\nrow  family  measured s  predicted s  error  error under the other half's factor\n" << table);
  CHECK(runs.size() >= 30);
  CHECK(by_source.size() >= 4);
  MESSAGE("global factor " << factor[0] << " (even rows), " << factor[1] << " (odd rows)");
  // As priced, with no factor (advisor/results/2026-11-28-published-runs.md):
  // everything but AxoNN's runs is 10-20% faster than measured, the same
  // on A100 and H100, Selene and MosaicML alike; MosaicML's H100 FSDP rows
  // 20-36%.
  const std::map<std::string, double> bound = {{"axonn", 0.10}, {"megatron", 0.15}, {"zero3", 0.20}};
  for (const auto& [family, errs] : abs_by_family) {
    const double med = ff::median(errs), sgn = ff::median(signed_by_family[family]);
    const double hmed = ff::median(held_abs[family]), hsgn = ff::median(held_signed[family]);
    MESSAGE(family << ": " << errs.size() << " rows, median |error| " << 100 * med << "%, signed " << 100 * sgn
                   << "%; under the other half's factor " << 100 * hmed << "%, signed " << 100 * hsgn << "%");
    CHECK(med <= bound.at(family));
    // MODEL.md §8's aim: each family within 10% once one global factor,
    // fitted on the other half, is applied.
    CHECK(hmed <= 0.10);
  }
  // AxoNN's own runs, the advisor's kind of pick: neither faster nor slower
  // on the median by more than 10%, as priced and under the factor.
  CHECK(std::abs(ff::median(signed_by_family["axonn"])) <= 0.10);
  CHECK(std::abs(ff::median(held_signed["axonn"])) <= 0.10);
}
