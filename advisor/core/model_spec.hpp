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

// Llama-style blocks (MODEL.md §12): the gated MLP (SiLU(x·W_gate) ⊙
// x·W_up, then W_down), RMSNorm (no mean, no bias), rotary positions (no
// learned table).
enum class Mlp { Gelu, SwiGlu };
enum class Norm { LayerNorm, RmsNorm };
enum class Positions { Learned, Rope };

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
  // Llama-style fields; their defaults are GPT's.
  int kv_heads = 0;  // A_kv key/value heads (grouped-query attention); 0: heads
  int head_dim = 0;  // d_h; 0: hidden / heads
  Mlp mlp = Mlp::Gelu;
  Norm norm = Norm::LayerNorm;
  Positions positions = Positions::Learned;
  bool bias = true;             // every linear layer's bias
  bool qkv_bias = true;         // QKV's bias (Qwen 2 keeps it with bias false)
  bool tied_embeddings = false; // the LM head is the embedding's weight

  int kv_head_count() const { return kv_heads ? kv_heads : heads; }
  int head_size() const { return head_dim ? head_dim : hidden / heads; }
  double attention_width() const { return double(heads) * head_size(); }  // A·d_h
  // Weights of one block's linear layers: QKV H·(A + 2A_kv)·d_h, out A·d_h·H,
  // the MLP 2·H·F (GELU) or 3·H·F (SwiGLU).
  double block_matmul_params() const;
  // Where a field is not GPT's, the first such: "" for a GPT block.
  std::string llama_feature() const;
};

// Parameters as stored: padded vocabulary rows included, the LM head unless
// tied, learned positions, biases and norm weights where the model has them.
double parameter_count(const ModelSpec& m);

// Model FLOPs of one iteration of `batch` sequences (Narayanan et al. 2021,
// generalised to F ≠ 4H, GQA and SwiGLU; attention counted non-causal, true
// vocabulary V).
double model_flops(const ModelSpec& m, double batch);

const std::vector<ModelSpec>& preset_models();

// A preset name or a path to a model JSON file or a Hugging Face config.json
// (hf_config.hpp); throws InputError naming the known presets, or the file and
// field that is wrong. seq_len > 0 overrides the model's. `notes`, if given,
// gets a line for each choice a person should see: an overridden seq_len, a
// config.json's ignored fields and where its seq_len came from.
ModelSpec load_model(const std::string& name_or_file, std::vector<std::string>* notes = nullptr, int seq_len = 0);
ModelSpec model_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json to_json(const ModelSpec& m);  // the model-file format, which model_from_json reads back

}  // namespace ff
