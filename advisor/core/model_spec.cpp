#include "advisor/core/model_spec.hpp"

#include <filesystem>
#include <limits>

#include "advisor/core/hf_config.hpp"
#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

ModelSpec gpt(const char* name, int layers, int hidden, int heads) {
  // MODEL.md §4: sequence 2048, GPT-2 BPE vocabulary padded to 50304, F = 4H.
  return ModelSpec{name, layers, hidden, heads, 4 * hidden, 50257, 50304, 2048};
}

long long round_up(long long v, long long multiple) { return (v + multiple - 1) / multiple * multiple; }

// Llama 3 (Meta's model card and config.json): GQA with 8 KV heads, head
// size 128, SwiGLU, RMSNorm, RoPE, no biases, untied embeddings, 128,256
// tokens (a multiple of 128 already), 8,192-token pretraining sequences.
ModelSpec llama3(const char* name, int layers, int hidden, int heads, int ffn) {
  ModelSpec m{name, layers, hidden, heads, ffn, 128256, 128256, 8192};
  m.kv_heads = 8;
  m.head_dim = 128;
  m.mlp = Mlp::SwiGlu;
  m.norm = Norm::RmsNorm;
  m.positions = Positions::Rope;
  m.bias = m.qkv_bias = false;
  return m;
}

}  // namespace

double ModelSpec::block_matmul_params() const {
  const double H = hidden, F = ffn, dh = head_size();
  return H * (heads + 2.0 * kv_head_count()) * dh + heads * dh * H + (mlp == Mlp::SwiGlu ? 3 : 2) * H * F;
}

std::string ModelSpec::llama_feature() const {
  if (kv_head_count() != heads) return "kv_heads " + std::to_string(kv_head_count()) + " (grouped-query attention)";
  if (head_size() * heads != hidden) return "head_dim " + std::to_string(head_size()) + " (heads × head_dim ≠ hidden)";
  if (mlp != Mlp::Gelu) return "mlp swiglu";
  if (norm != Norm::LayerNorm) return "norm rmsnorm";
  if (positions != Positions::Learned) return "positions rope";
  if (!bias || !qkv_bias) return "bias false";
  if (tied_embeddings) return "tied_embeddings true";
  return "";
}

const std::vector<ModelSpec>& preset_models() {
  static const std::vector<ModelSpec> presets = {
      gpt("gpt-5b", 24, 4096, 32),    gpt("gpt-10b", 32, 5120, 40),   gpt("gpt-20b", 32, 7168, 56),
      gpt("gpt-40b", 38, 9216, 72),   gpt("gpt-60b", 56, 9216, 72),   gpt("gpt-80b", 42, 12288, 96),
      gpt("gpt-160b", 84, 12288, 96), gpt("gpt-320b", 96, 16384, 128), gpt("gpt-640b", 192, 16384, 128),
      llama3("llama3-8b", 32, 4096, 32, 14336), llama3("llama3-70b", 80, 8192, 64, 28672),
      llama3("llama3-405b", 126, 16384, 128, 53248),
  };
  return presets;
}

double parameter_count(const ModelSpec& m) {
  const double H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  const double norm = m.norm == Norm::LayerNorm ? 2 * H : H;  // γ and β, or γ alone
  double biases = m.qkv_bias ? (m.heads + 2.0 * m.kv_head_count()) * m.head_size() : 0;
  if (m.bias) biases += H + (m.mlp == Mlp::SwiGlu ? 2 : 1) * F + H;  // out, the MLP's up (and gate), down
  const double block = m.block_matmul_params() + biases + 2 * norm;
  return m.layers * block + (m.tied_embeddings ? 1 : 2) * Vp * H  // embedding, and the LM head unless tied
         + (m.positions == Positions::Learned ? S * H : 0) + norm;  // positions, final norm
}

double model_flops(const ModelSpec& m, double batch) {
  // 3 passes (forward, 2× backward) × 2 FLOPs per multiply-add, per token:
  // the block's linear layers, attention L·2·S·A·d_h (QKᵀ and AV,
  // non-causal), LM head H·V. For a GPT block with F = 4H this is
  // 72·B·S·L·H²·(1 + S/6H + V/12LH).
  const double S = m.seq_len;
  const double per_token = m.layers * (m.block_matmul_params() + 2 * S * m.attention_width()) + double(m.hidden) * m.vocab;
  return 6.0 * batch * S * per_token;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j = {{"name", m.name},         {"layers", m.layers}, {"hidden", m.hidden},
                      {"heads", m.heads},       {"ffn", m.ffn},       {"vocab", m.vocab},
                      {"padded_vocab", m.padded_vocab}, {"seq_len", m.seq_len}};
  // Written only where not the default, so files without them read back the same.
  if (m.attention == Attention::Unfused) j["attention"] = "unfused";
  if (m.attention_dropout) j["attention_dropout"] = true;
  if (m.kv_heads) j["kv_heads"] = m.kv_heads;
  if (m.head_dim) j["head_dim"] = m.head_dim;
  if (m.mlp == Mlp::SwiGlu) j["mlp"] = "swiglu";
  if (m.norm == Norm::RmsNorm) j["norm"] = "rmsnorm";
  if (m.positions == Positions::Rope) j["positions"] = "rope";
  if (!m.bias) j["bias"] = false;
  if (m.qkv_bias != m.bias) j["qkv_bias"] = m.qkv_bias;
  if (m.tied_embeddings) j["tied_embeddings"] = true;
  return j;
}

ModelSpec model_from_json(const nlohmann::json& j, const std::string& origin) {
  Fields f(j, origin);
  f.only({"name", "layers", "hidden", "heads", "ffn", "vocab", "padded_vocab", "seq_len", "attention",
          "attention_dropout", "kv_heads", "head_dim", "mlp", "norm", "positions", "bias", "qkv_bias",
          "tied_embeddings"});
  ModelSpec m;
  m.name = f.has("name") ? f.string("name") : std::filesystem::path(origin).stem().string();
  m.layers = static_cast<int>(f.integer("layers", 1));
  m.hidden = static_cast<int>(f.integer("hidden", 1));
  m.heads = static_cast<int>(f.integer("heads", 1));
  // The defaults derived below are ints too.
  constexpr long long kMax = std::numeric_limits<int>::max();
  if (!f.has("ffn") && 4LL * m.hidden > kMax)
    f.fail("hidden", "at most " + std::to_string(kMax / 4) + " (ffn, not given, is 4 × hidden)");
  m.ffn = static_cast<int>(f.integer_or("ffn", 1, 4LL * m.hidden));
  m.vocab = static_cast<int>(f.integer("vocab", 1));
  m.seq_len = static_cast<int>(f.integer("seq_len", 1));
  // Unless the file pads it, pad to a multiple of 128: every power-of-two G_y
  // up to 128 then divides it, as 50304 does for GPT-2's 50257.
  if (!f.has("padded_vocab") && round_up(m.vocab, 128) > kMax)
    f.fail("vocab", "at most " + std::to_string(kMax / 128 * 128) + " (padded_vocab, not given, rounds it up to 128)");
  m.padded_vocab = static_cast<int>(f.integer_or("padded_vocab", 1, round_up(m.vocab, 128)));
  if (m.padded_vocab < m.vocab) f.fail("padded_vocab", "an integer >= vocab (" + std::to_string(m.vocab) + ")");
  if (f.has("head_dim")) m.head_dim = static_cast<int>(f.integer("head_dim", 1));
  else if (m.hidden % m.heads != 0)
    f.fail("heads", "a divisor of hidden (" + std::to_string(m.hidden) + "), or give head_dim");
  if (f.has("kv_heads")) {
    m.kv_heads = static_cast<int>(f.integer("kv_heads", 1));
    if (m.kv_heads > m.heads || m.heads % m.kv_heads)
      f.fail("kv_heads", "a divisor of heads (" + std::to_string(m.heads) + "): each KV head serves a group of query heads");
  }
  auto choice = [&](const char* key, const char* a, const char* b) {
    if (!f.has(key)) return false;
    const std::string v = f.string(key);
    if (v != a && v != b) f.fail(key, std::string("\"") + a + "\" or \"" + b + "\"");
    return v == b;
  };
  if (choice("mlp", "gelu", "swiglu")) m.mlp = Mlp::SwiGlu;
  if (choice("norm", "layernorm", "rmsnorm")) m.norm = Norm::RmsNorm;
  if (choice("positions", "learned", "rope")) m.positions = Positions::Rope;
  m.bias = f.boolean_or("bias", true);
  m.qkv_bias = f.boolean_or("qkv_bias", m.bias);
  m.tied_embeddings = f.boolean_or("tied_embeddings", false);
  if (f.has("attention")) {
    const std::string a = f.string("attention");
    if (a == "unfused") m.attention = Attention::Unfused;
    else if (a != "flash") f.fail("attention", "\"flash\" or \"unfused\"");
  }
  m.attention_dropout = f.boolean_or("attention_dropout", false);
  if (m.attention_dropout && m.attention == Attention::Flash)
    f.fail("attention_dropout", "false with flash attention (its dropout never reaches memory; set attention to \"unfused\")");
  return m;
}

ModelSpec load_model(const std::string& name_or_file, std::vector<std::string>* notes, int seq_len) {
  auto note = [&](const std::string& line) {
    if (notes) notes->push_back(line);
  };
  // --seq-len over a preset's or a model file's own length: said where they differ.
  auto with_seq_len = [&](ModelSpec m, const char* whose) {
    if (seq_len > 0 && seq_len != m.seq_len)
      note("seq_len " + std::to_string(seq_len) + " from --seq-len (the " + whose + " says " +
           std::to_string(m.seq_len) + ")");
    if (seq_len > 0) m.seq_len = seq_len;
    return m;
  };
  for (const auto& m : preset_models())
    if (m.name == name_or_file) return with_seq_len(m, "preset");
  bool looks_like_file = name_or_file.find('/') != std::string::npos ||
                         name_or_file.ends_with(".json") || std::filesystem::exists(name_or_file);
  if (!looks_like_file) {
    std::string known;
    for (const auto& m : preset_models()) known += (known.empty() ? "" : ", ") + m.name;
    input_error("unknown model '" + name_or_file + "'; known presets: " + known +
                " (or give a model JSON file: layers, hidden, heads, vocab, seq_len[, ffn, padded_vocab], "
                "or a Hugging Face config.json)");
  }
  const nlohmann::json j = read_json_file(name_or_file);
  if (!is_hf_config(j)) return with_seq_len(model_from_json(j, name_or_file), "file");
  // A config.json holds more than the shape: what was passed over, and where
  // the sequence length came from, are a person's to check.
  const HfModel hf = model_from_hf_config(j, name_or_file, seq_len);
  std::string ignored;
  for (const auto& key : hf.ignored) ignored += (ignored.empty() ? "" : ", ") + key;
  if (!ignored.empty()) note(name_or_file + ": fields ignored (they cost nothing): " + ignored);
  const std::string length = "seq_len " + std::to_string(hf.model.seq_len) + " from " + hf.seq_len_from;
  std::string says = " (--seq-len sets it)";
  if (hf.seq_len_from == "--seq-len") {
    says.clear();
    for (const char* key : {"max_position_embeddings", "n_positions"})
      if (j.contains(key) && j.at(key).is_number_integer()) says = " (the file says " + j.at(key).dump() + ")";
  }
  note(length + says);
  return hf.model;
}

}  // namespace ff
