#include "advisor/core/model_spec.hpp"

#include <filesystem>
#include <limits>

#include "advisor/core/json_fields.hpp"

namespace ff {

namespace {

ModelSpec gpt(const char* name, int layers, int hidden, int heads) {
  // MODEL.md §4: sequence 2048, GPT-2 BPE vocabulary padded to 50304, F = 4H.
  return ModelSpec{name, layers, hidden, heads, 4 * hidden, 50257, 50304, 2048};
}

long long round_up(long long v, long long multiple) { return (v + multiple - 1) / multiple * multiple; }

}  // namespace

const std::vector<ModelSpec>& preset_models() {
  static const std::vector<ModelSpec> presets = {
      gpt("gpt-5b", 24, 4096, 32),    gpt("gpt-10b", 32, 5120, 40),   gpt("gpt-20b", 32, 7168, 56),
      gpt("gpt-40b", 38, 9216, 72),   gpt("gpt-60b", 56, 9216, 72),   gpt("gpt-80b", 42, 12288, 96),
      gpt("gpt-160b", 84, 12288, 96), gpt("gpt-320b", 96, 16384, 128), gpt("gpt-640b", 192, 16384, 128),
  };
  return presets;
}

double parameter_count(const ModelSpec& m) {
  double H = m.hidden, F = m.ffn, Vp = m.padded_vocab, S = m.seq_len;
  double block = 4 * H * H + 2 * H * F  // QKV, out, FC1, FC2 weights
                 + 3 * H + H + F + H    // their biases
                 + 4 * H;               // two LayerNorms
  return m.layers * block + 2 * Vp * H  // embedding and untied LM head
         + S * H + 2 * H;               // positions, final LayerNorm
}

double model_flops(const ModelSpec& m, double batch) {
  // 3 passes (forward, 2× backward) × 2 FLOPs per multiply-add, per token:
  // linear layers L·(4H² + 2HF), attention L·2SH (QKᵀ and AV, non-causal),
  // LM head H·V. For F = 4H this is 72·B·S·L·H²·(1 + S/6H + V/12LH).
  double H = m.hidden, F = m.ffn, S = m.seq_len;
  double per_token = m.layers * (4 * H * H + 2 * H * F + 2 * S * H) + H * m.vocab;
  return 6.0 * batch * S * per_token;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j = {{"name", m.name},         {"layers", m.layers}, {"hidden", m.hidden},
                      {"heads", m.heads},       {"ffn", m.ffn},       {"vocab", m.vocab},
                      {"padded_vocab", m.padded_vocab}, {"seq_len", m.seq_len}};
  // Written only where not the default, so files without them read back the same.
  if (m.attention == Attention::Unfused) j["attention"] = "unfused";
  if (m.attention_dropout) j["attention_dropout"] = true;
  return j;
}

ModelSpec model_from_json(const nlohmann::json& j, const std::string& origin) {
  Fields f(j, origin);
  f.only({"name", "layers", "hidden", "heads", "ffn", "vocab", "padded_vocab", "seq_len", "attention",
          "attention_dropout"});
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
  if (m.hidden % m.heads != 0)
    f.fail("heads", "a divisor of hidden (" + std::to_string(m.hidden) + ")");
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

ModelSpec load_model(const std::string& name_or_file) {
  for (const auto& m : preset_models())
    if (m.name == name_or_file) return m;
  bool looks_like_file = name_or_file.find('/') != std::string::npos ||
                         name_or_file.ends_with(".json") || std::filesystem::exists(name_or_file);
  if (!looks_like_file) {
    std::string known;
    for (const auto& m : preset_models()) known += (known.empty() ? "" : ", ") + m.name;
    input_error("unknown model '" + name_or_file + "'; known presets: " + known +
                " (or give a model JSON file: layers, hidden, heads, vocab, seq_len[, ffn, padded_vocab])");
  }
  return model_from_json(read_json_file(name_or_file), name_or_file);
}

}  // namespace ff
