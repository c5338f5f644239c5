#pragma once
// A GPT-style decoder's shape: the presets of the AxoNN papers and model files.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ff {

// How attention runs (MODEL.md §10): fused flash attention (causal half,
// no S×S matrix in memory), or unfused: full S×S scores per head written,
// softmaxed and (with dropout) masked in memory, the masked half computed too.
enum class Attention { Flash, Unfused };

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int ffn = 0;           // F, 4·hidden unless the file says otherwise
  int vocab = 0;         // V, the tokenizer's size
  int padded_vocab = 0;  // Vp ≥ V, rows of the embedding and LM head
  int seq_len = 0;       // S
  Attention attention = Attention::Flash;
  bool attention_dropout = false;  // unfused: dropout on the probabilities (a mask in memory)
};

// Parameters as stored: padded vocabulary rows included, embedding untied from
// the LM head, learned positions, biases and LayerNorm weights.
double parameter_count(const ModelSpec& m);

// Model FLOPs of one iteration of `batch` sequences (Narayanan et al. 2021,
// generalised to F ≠ 4H; attention counted non-causal, true vocabulary V).
double model_flops(const ModelSpec& m, double batch);

const std::vector<ModelSpec>& preset_models();

// A preset name or a path to a model JSON file; throws InputError naming the
// known presets, or the file and field that is wrong.
ModelSpec load_model(const std::string& name_or_file);
ModelSpec model_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json to_json(const ModelSpec& m);  // the model-file format, which model_from_json reads back

}  // namespace ff
