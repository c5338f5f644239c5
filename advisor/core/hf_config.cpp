#include "advisor/core/hf_config.hpp"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <limits>

#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

enum class Family { Llama, Mistral, Qwen2, Gpt2 };  // kHfArchitectures' order

constexpr long long kIntMax = std::numeric_limits<int>::max();

// The fields the shape is read from.
const std::vector<const char*>& shape_fields(Family fam) {
  static const std::vector<const char*> llama = {
      "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
      "vocab_size", "head_dim", "hidden_act", "tie_word_embeddings", "max_position_embeddings"};
  static const std::vector<const char*> gpt2 = {"n_embd", "n_layer", "n_head", "n_inner", "vocab_size",
                                                "activation_function", "tie_word_embeddings", "n_positions"};
  return fam == Family::Gpt2 ? gpt2 : llama;
}

// Fields that switch on what the model cannot price; accepted while off (and
// then listed as ignored), refused by name while on.
const std::vector<const char*>& switch_fields(Family fam) {
  static const std::vector<const char*> llama = {"attention_dropout", "attention_bias", "mlp_bias"};
  static const std::vector<const char*> mistral = {"attention_dropout", "attention_bias", "mlp_bias", "sliding_window"};
  static const std::vector<const char*> qwen2 = {"attention_dropout", "sliding_window", "use_sliding_window",
                                                 "use_mrope"};
  static const std::vector<const char*> none;
  switch (fam) {
    case Family::Llama: return llama;
    case Family::Mistral: return mistral;
    case Family::Qwen2: return qwen2;
    case Family::Gpt2: return none;
  }
  return none;
}

// Mixture-of-experts fields (and any "moe_*"): layers the model has no terms for.
constexpr const char* kExpertFields[] = {"num_local_experts", "num_experts", "num_experts_per_tok",
                                         "n_routed_experts", "n_shared_experts", "shared_expert_intermediate_size"};

void refuse_experts(const Fields& f) {
  // The named fields first, so a Mixtral file is refused at its expert count.
  std::vector<std::string> keys(std::begin(kExpertFields), std::end(kExpertFields));
  for (auto it = f.json().begin(); it != f.json().end(); ++it)
    if (it.key().starts_with("moe_")) keys.push_back(it.key());
  for (const auto& key : keys) {
    if (!f.has(key)) continue;
    const nlohmann::json& v = f.json().at(key);
    if ((v.is_number() && v.get<double>() == 0) || v == false) continue;
    f.fail(key, "absent, null or 0: mixture-of-experts layers are not modelled");
  }
}

std::string supported_list() {
  std::string names;
  for (const char* a : kHfArchitectures) names += (names.empty() ? "" : ", ") + std::string(a);
  return names;
}

Family family(const Fields& f) {
  std::string arch;
  const char* key = "architectures";
  if (f.has(key)) {
    const nlohmann::json& a = f.array(key);
    if (a.empty() || !a[0].is_string()) f.fail(key, "a list whose first entry names the architecture");
    arch = a[0].get<std::string>();
  } else {
    // Older files name only the model_type.
    key = "model_type";
    const std::string type = f.string(key);
    constexpr const char* kTypes[] = {"llama", "mistral", "qwen2", "gpt2"};
    for (size_t i = 0; i < std::size(kTypes); ++i)
      if (type == kTypes[i]) arch = kHfArchitectures[i];
  }
  for (size_t i = 0; i < std::size(kHfArchitectures); ++i)
    if (arch == kHfArchitectures[i]) return static_cast<Family>(i);
  f.fail(key, "one of " + supported_list());
}

// Every field a file of this family may hold; the rest are refused with the
// closest of these named, so a misspelt size is never read as absent.
std::vector<const char*> known_fields(const Fields& f, Family fam) {
  std::vector<const char*> known = shape_fields(fam);
  known.insert(known.end(), switch_fields(fam).begin(), switch_fields(fam).end());
  known.insert(known.end(), std::begin(kHfCostFreeFields), std::end(kHfCostFreeFields));
  known.insert(known.end(), std::begin(kExpertFields), std::end(kExpertFields));
  for (auto it = f.json().begin(); it != f.json().end(); ++it)  // switched off: refuse_experts ran
    if (it.key().starts_with("moe_")) known.push_back(it.key().c_str());
  return known;
}

int count(const Fields& f, const char* key) { return static_cast<int>(f.integer(key, 1)); }

// Heads × head size must make the attention width; a KV head serves a whole group.
void set_heads(ModelSpec& m, const Fields& f, const char* heads_key, const char* kv_key) {
  if (f.has("head_dim")) m.head_dim = count(f, "head_dim");
  else if (m.hidden % m.heads)
    f.fail(heads_key, "a divisor of the hidden size (" + std::to_string(m.hidden) + "), or give head_dim");
  if (!kv_key || !f.has(kv_key)) return;
  m.kv_heads = count(f, kv_key);
  if (m.kv_heads > m.heads || m.heads % m.kv_heads)
    f.fail(kv_key, "a divisor of " + std::string(heads_key) + " (" + std::to_string(m.heads) +
                       "): each key/value head serves a group of query heads");
}

// Llama's q, k, v, o carry attention_bias and its MLP mlp_bias: both or
// neither is a bias on every linear layer or none; one alone has no field here.
void set_biases(ModelSpec& m, const Fields& f, Family fam) {
  if (fam == Family::Qwen2) {  // Qwen 2: biases on q, k, v only
    m.bias = false;
    m.qkv_bias = true;
    return;
  }
  const bool attention = f.boolean_or("attention_bias", false), mlp = f.boolean_or("mlp_bias", false);
  if (attention != mlp)
    f.fail(attention ? "attention_bias" : "mlp_bias",
           std::string("false (or attention_bias and mlp_bias both true): a bias on ") +
               (attention ? "attention alone" : "the MLP alone") + " is not modelled");
  m.bias = m.qkv_bias = attention;
}

void refuse_switched_on(const Fields& f, Family fam) {
  if (f.number_or("attention_dropout", 0) != 0)
    f.fail("attention_dropout", "0 (attention dropout reaches memory only unfused: write a model file with "
                                "attention \"unfused\" and attention_dropout true)");
  // Qwen 2 files carry a window with use_sliding_window false; Mistral's is on whenever set.
  const bool window_on = f.boolean_or("use_sliding_window", fam != Family::Qwen2);
  if (f.has("sliding_window") && window_on)
    f.fail(f.has("use_sliding_window") ? "use_sliding_window" : "sliding_window",
           std::string(f.has("use_sliding_window") ? "false" : "null") +
               ": sliding-window attention is not modelled (every token attends to the whole sequence)");
  if (f.boolean_or("use_mrope", false)) f.fail("use_mrope", "false: multimodal RoPE is not modelled");
}

ModelSpec llama_shape(const Fields& f, Family fam) {
  ModelSpec m;
  m.layers = count(f, "num_hidden_layers");
  m.hidden = count(f, "hidden_size");
  m.heads = count(f, "num_attention_heads");
  m.ffn = count(f, "intermediate_size");
  m.vocab = count(f, "vocab_size");
  set_heads(m, f, "num_attention_heads", "num_key_value_heads");
  // The gated MLP is SiLU(x·W_gate) ⊙ x·W_up: another activation is another block.
  if (f.has("hidden_act") && f.string("hidden_act") != "silu")
    f.fail("hidden_act", "\"silu\" (the SwiGLU MLP; " + std::string(kHfArchitectures[int(fam)]) +
                             " with another activation is not modelled)");
  m.mlp = Mlp::SwiGlu;
  m.norm = Norm::RmsNorm;
  m.positions = Positions::Rope;
  set_biases(m, f, fam);
  refuse_switched_on(f, fam);
  m.tied_embeddings = f.boolean_or("tie_word_embeddings", false);  // LlamaConfig's default, and Mistral's, Qwen 2's
  return m;
}

ModelSpec gpt2_shape(const Fields& f) {
  ModelSpec m;
  m.layers = count(f, "n_layer");
  m.hidden = count(f, "n_embd");
  m.heads = count(f, "n_head");
  m.vocab = count(f, "vocab_size");
  if (!f.has("n_inner") && 4LL * m.hidden > kIntMax)
    f.fail("n_embd", "at most " + std::to_string(kIntMax / 4) + " (n_inner, null, is 4 × n_embd)");
  m.ffn = static_cast<int>(f.integer_or("n_inner", 1, 4LL * m.hidden));
  set_heads(m, f, "n_head", nullptr);
  // gelu_new is GELU's tanh approximation: the same two matmuls, the same bytes.
  const std::string act = f.has("activation_function") ? f.string("activation_function") : "gelu_new";
  if (act != "gelu" && act != "gelu_new")
    f.fail("activation_function", "\"gelu\" or \"gelu_new\" (another activation is not modelled)");
  m.tied_embeddings = f.boolean_or("tie_word_embeddings", true);  // PretrainedConfig's default, GPT-2's
  return m;
}

// As model files are named, by the file's stem; a checkpoint's "config.json"
// by its directory, which names the checkpoint.
std::string model_name(const std::string& origin) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(origin).lexically_normal();
  if (p.stem() != "config") return p.stem().string();
  const fs::path dir = fs::absolute(p).parent_path().filename();
  return dir.empty() ? p.stem().string() : dir.string();
}

void set_seq_len(HfModel& out, const Fields& f, Family fam, int seq_len) {
  const char* key = fam == Family::Gpt2 ? "n_positions" : "max_position_embeddings";
  ModelSpec& m = out.model;
  if (seq_len <= 0) {
    m.seq_len = count(f, key);
    out.seq_len_from = key;
    return;
  }
  // A learned table has a row per position: a longer sequence has no embedding.
  if (m.positions == Positions::Learned && f.has(key) && seq_len > count(f, key))
    f.fail(key, "at least --seq-len " + std::to_string(seq_len) + " (learned positions: one row per position)");
  m.seq_len = seq_len;
  out.seq_len_from = "--seq-len";
}

std::vector<std::string> ignored_fields(const Fields& f, Family fam) {
  const auto& read = shape_fields(fam);
  std::vector<std::string> ignored;
  for (auto it = f.json().begin(); it != f.json().end(); ++it)
    if (std::find(read.begin(), read.end(), it.key()) == read.end()) ignored.push_back(it.key());
  return ignored;
}

}  // namespace

bool is_hf_config(const nlohmann::json& j) {
  return j.is_object() && (j.contains("architectures") || j.contains("model_type"));
}

HfModel model_from_hf_config(const nlohmann::json& j, const std::string& origin, int seq_len) {
  Fields f(j, origin);
  refuse_experts(f);
  const Family fam = family(f);
  f.only(known_fields(f, fam));
  HfModel out;
  out.model = fam == Family::Gpt2 ? gpt2_shape(f) : llama_shape(f, fam);
  ModelSpec& m = out.model;
  m.name = model_name(origin);
  // The project's rule (model files): pad to a multiple of 128, which every
  // power-of-two G_y up to 128 divides, as 50304 does for GPT-2's 50257.
  if (m.vocab > kIntMax / 128 * 128)
    f.fail("vocab_size", "at most " + std::to_string(kIntMax / 128 * 128) + " (padded up to a multiple of 128)");
  m.padded_vocab = static_cast<int>((m.vocab + 127LL) / 128 * 128);
  set_seq_len(out, f, fam, seq_len);
  out.ignored = ignored_fields(f, fam);
  return out;
}

}  // namespace ff
