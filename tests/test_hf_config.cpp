// Hugging Face config.json files read as models: real published files
// (tests/fixtures/hf/README.md says where each came from) give the published
// parameter counts; what the model cannot price is refused by name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "advisor/core/hf_config.hpp"
#include "advisor/core/json_fields.hpp"
#include "advisor/core/model_spec.hpp"
#include "tests/helpers.hpp"

using namespace ff;
using fftest::contains;
using fftest::input_error_of;
using fftest::rel;

namespace {

const std::string kLlama = "hf/Meta-Llama-3.1-8B.json";
const std::string kQwen = "hf/Qwen2-7B.json";
const std::string kMistral = "hf/Mistral-7B-Instruct-v0.3.json";
const std::string kGpt2 = "hf/gpt2/config.json";

nlohmann::json fixture_json(const std::string& name) { return read_json_file(fftest::fixture(name)); }

HfModel load(const std::string& name, int seq_len = 0) {
  return model_from_hf_config(fixture_json(name), fftest::fixture(name), seq_len);
}

// The message for a fixture changed in memory as `edit` says: it names the file.
template <class Edit>
std::string refusal(const std::string& name, Edit&& edit) {
  nlohmann::json j = fixture_json(name);
  edit(j);
  return input_error_of([&] { model_from_hf_config(j, fftest::fixture(name), 0); });
}

bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("hf_config: published files give the published parameter counts") {
  SUBCASE("Llama 3.1 8B") {
    // Per block: q 4096·(32·128), k and v 4096·(8·128) each, o (32·128)·4096,
    // SwiGLU 3·4096·14336, two RMSNorm weights; 32 blocks, the embedding and an
    // untied head 128256·4096 each (128256 = 1002·128: no padding), final norm.
    const double block = 4096.0 * 32 * 128 + 2 * 4096.0 * 8 * 128 + 32.0 * 128 * 4096 + 3 * 4096.0 * 14336 + 2 * 4096.0;
    const double hand = 32 * block + 2 * 128256.0 * 4096 + 4096;
    CHECK(hand == 8'030'261'248.0);
    CHECK(parameter_count(load(kLlama).model) == rel(hand));
    CHECK(parameter_count(load(kLlama).model) == doctest::Approx(8.03e9).epsilon(0.005));  // Meta: 8.03B
  }
  SUBCASE("Qwen2-7B") {
    // As Llama, plus biases on q, k, v (28 + 2·4)·128; 152064 = 1188·128.
    const double block = 3584.0 * 28 * 128 + 2 * 3584.0 * 4 * 128 + (28 + 2 * 4) * 128.0 + 28.0 * 128 * 3584 +
                         3 * 3584.0 * 18944 + 2 * 3584.0;
    const double hand = 28 * block + 2 * 152064.0 * 3584 + 3584;
    CHECK(hand == 7'615'616'512.0);  // Qwen's published count
    CHECK(parameter_count(load(kQwen).model) == rel(hand));
    CHECK(parameter_count(load(kQwen).model) == doctest::Approx(7.62e9).epsilon(0.005));
  }
  SUBCASE("Mistral 7B v0.3") {
    // Llama 3 8B's block (same sizes), 32768 tokens = 256·128, untied.
    const double block = 4096.0 * 32 * 128 + 2 * 4096.0 * 8 * 128 + 32.0 * 128 * 4096 + 3 * 4096.0 * 14336 + 2 * 4096.0;
    const double hand = 32 * block + 2 * 32768.0 * 4096 + 4096;
    CHECK(parameter_count(load(kMistral).model) == rel(hand));
    CHECK(parameter_count(load(kMistral).model) == doctest::Approx(7.24e9).epsilon(0.005));  // Mistral: 7.24B (v0.1)
  }
  SUBCASE("GPT-2 small, its vocabulary padded") {
    // Per block: QKV 768·3·768 + 3·768, out 768·768 + 768, MLP 768·3072 + 3072
    // and 3072·768 + 768, two LayerNorms γ and β 2·2·768; 12 blocks, the tied
    // embedding, 1024 learned positions, final LayerNorm. OpenAI's 124,439,808
    // counts 50257 embedding rows; the project pads to 50304, 47 rows more.
    const double block = 768.0 * 3 * 768 + 3 * 768 + 768.0 * 768 + 768 + 768.0 * 3072 + 3072 + 3072.0 * 768 + 768 +
                         2 * 2 * 768.0;
    const double hand = 12 * block + 50304.0 * 768 + 1024.0 * 768 + 2 * 768;
    CHECK(hand - (50304 - 50257) * 768.0 == 124'439'808.0);
    CHECK(parameter_count(load(kGpt2).model) == rel(hand));
    CHECK(parameter_count(load(kGpt2).model) == doctest::Approx(124'439'808.0).epsilon(0.005));
  }
}

TEST_CASE("hf_config: the block's fields come out as the file says") {
  const ModelSpec llama = load(kLlama).model;
  CHECK(llama.name == "Meta-Llama-3.1-8B");
  CHECK(llama.layers == 32);
  CHECK(llama.hidden == 4096);
  CHECK(llama.heads == 32);
  CHECK(llama.kv_head_count() == 8);
  CHECK(llama.head_size() == 128);
  CHECK(llama.ffn == 14336);
  CHECK(llama.vocab == 128256);
  CHECK(llama.padded_vocab == 128256);
  CHECK(llama.mlp == Mlp::SwiGlu);
  CHECK(llama.norm == Norm::RmsNorm);
  CHECK(llama.positions == Positions::Rope);
  CHECK_FALSE(llama.bias);
  CHECK_FALSE(llama.qkv_bias);
  CHECK_FALSE(llama.tied_embeddings);

  const ModelSpec qwen = load(kQwen).model;
  CHECK(qwen.kv_head_count() == 4);
  CHECK(qwen.head_size() == 3584 / 28);  // no head_dim: hidden / heads
  CHECK_FALSE(qwen.bias);
  CHECK(qwen.qkv_bias);  // Qwen 2: q, k, v biased, nothing else
  CHECK_FALSE(qwen.tied_embeddings);

  const ModelSpec mistral = load(kMistral).model;
  CHECK(mistral.kv_head_count() == 8);
  CHECK(mistral.vocab == 32768);
  CHECK(mistral.mlp == Mlp::SwiGlu);

  const ModelSpec gpt2 = load(kGpt2).model;
  CHECK(gpt2.name == "gpt2");  // a checkpoint's config.json: named by its directory
  CHECK(gpt2.layers == 12);
  CHECK(gpt2.hidden == 768);
  CHECK(gpt2.heads == 12);
  CHECK(gpt2.kv_head_count() == 12);
  CHECK(gpt2.ffn == 4 * 768);  // n_inner null
  CHECK(gpt2.vocab == 50257);
  CHECK(gpt2.padded_vocab == 50304);
  CHECK(gpt2.mlp == Mlp::Gelu);
  CHECK(gpt2.norm == Norm::LayerNorm);
  CHECK(gpt2.positions == Positions::Learned);
  CHECK(gpt2.bias);
  CHECK(gpt2.qkv_bias);
  CHECK(gpt2.tied_embeddings);  // absent: GPT-2 ties its head
  CHECK(gpt2.llama_feature() == "tied_embeddings true");

  CHECK(is_hf_config(fixture_json(kGpt2)));
  CHECK_FALSE(is_hf_config(to_json(load_model("gpt-5b"))));
}

TEST_CASE("hf_config: the sequence length, from the file or --seq-len") {
  HfModel m = load(kLlama);
  CHECK(m.model.seq_len == 131072);
  CHECK(m.seq_len_from == "max_position_embeddings");
  m = load(kLlama, 8192);
  CHECK(m.model.seq_len == 8192);
  CHECK(m.seq_len_from == "--seq-len");
  m = load(kGpt2);
  CHECK(m.model.seq_len == 1024);
  CHECK(m.seq_len_from == "n_positions");
  CHECK(load(kGpt2, 512).model.seq_len == 512);
  // 1024 learned positions: no embedding for a 1025th token.
  const std::string msg = input_error_of([] { load(kGpt2, 2048); });
  CHECK(contains(msg, fftest::fixture(kGpt2) + ": field 'n_positions'"));
  CHECK(contains(msg, "2048"));
}

TEST_CASE("hf_config: what the model cannot price is refused, naming file and field") {
  const std::string llama = fftest::fixture(kLlama), mistral = fftest::fixture(kMistral);
  SUBCASE("an unknown field, with the closest known name") {
    const std::string msg = refusal(kLlama, [](nlohmann::json& j) { j["hiden_size"] = j["hidden_size"]; });
    CHECK(contains(msg, llama + ": field 'hiden_size': unknown field (did you mean 'hidden_size'?)"));
    // Another architecture's field is unknown here too.
    CHECK(contains(refusal(kLlama, [](nlohmann::json& j) { j["n_embd"] = 4096; }), "field 'n_embd': unknown field"));
  }
  SUBCASE("mixture of experts") {
    // The real Mixtral file: its expert count named.
    const std::string mixtral = fftest::fixture("hf/Mixtral-8x7B-v0.1.json");
    const std::string msg = input_error_of([&] { model_from_hf_config(read_json_file(mixtral), mixtral, 0); });
    CHECK(contains(msg, mixtral + ": field 'num_local_experts'"));
    CHECK(contains(msg, "mixture-of-experts"));
    CHECK(contains(refusal(kMistral, [](nlohmann::json& j) { j["moe_intermediate_size"] = 1408; }),
                   mistral + ": field 'moe_intermediate_size'"));
    // Present but 0: nothing to price, listed as ignored.
    nlohmann::json j = fixture_json(kMistral);
    j["num_experts"] = 0;
    CHECK(listed(model_from_hf_config(j, mistral, 0).ignored, "num_experts"));
  }
  SUBCASE("an active sliding window") {
    // Mistral 7B v0.1 ships "sliding_window": 4096; v0.3's null is inactive.
    const std::string msg = refusal(kMistral, [](nlohmann::json& j) { j["sliding_window"] = 4096; });
    CHECK(contains(msg, mistral + ": field 'sliding_window'"));
    CHECK(contains(msg, "sliding-window attention is not modelled"));
    // Qwen 2's window counts only with use_sliding_window true.
    CHECK(contains(refusal(kQwen, [](nlohmann::json& j) { j["use_sliding_window"] = true; }),
                   fftest::fixture(kQwen) + ": field 'use_sliding_window'"));
  }
  SUBCASE("a Llama with another activation") {
    const std::string msg = refusal(kLlama, [](nlohmann::json& j) { j["hidden_act"] = "gelu"; });
    CHECK(contains(msg, llama + ": field 'hidden_act': expected \"silu\""));
    CHECK(contains(msg, "\"gelu\""));
  }
  SUBCASE("an unsupported architecture, with the supported ones") {
    const std::string msg = refusal(kLlama, [](nlohmann::json& j) { j["architectures"] = {"GemmaForCausalLM"}; });
    CHECK(contains(msg, llama + ": field 'architectures'"));
    CHECK(contains(msg, "GemmaForCausalLM"));
    CHECK(contains(msg, "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel"));
  }
  SUBCASE("biases on attention alone; on every layer they are a GPT's") {
    CHECK(contains(refusal(kLlama, [](nlohmann::json& j) { j["attention_bias"] = true; }),
                   llama + ": field 'attention_bias'"));
    CHECK(contains(refusal(kLlama, [](nlohmann::json& j) { j["mlp_bias"] = true; }), llama + ": field 'mlp_bias'"));
    nlohmann::json j = fixture_json(kLlama);
    j["attention_bias"] = j["mlp_bias"] = true;
    const ModelSpec m = model_from_hf_config(j, llama, 0).model;
    CHECK(m.bias);
    CHECK(m.qkv_bias);
  }
}

TEST_CASE("hf_config: fields that cost nothing are listed as ignored") {
  const HfModel llama = load(kLlama);
  for (const char* key : {"architectures", "bos_token_id", "rope_scaling", "rope_theta", "rms_norm_eps",
                          "attention_bias", "mlp_bias", "attention_dropout", "torch_dtype", "pretraining_tp"})
    CHECK_MESSAGE(listed(llama.ignored, key), key);
  for (const char* key : {"hidden_size", "num_key_value_heads", "max_position_embeddings", "vocab_size"})
    CHECK_MESSAGE(!listed(llama.ignored, key), key);
  // Every field is read or listed: the 9 shape fields it has (no head_dim), the rest ignored.
  CHECK(llama.ignored.size() == fixture_json(kLlama).size() - 9);

  const HfModel qwen = load(kQwen);
  for (const char* key : {"sliding_window", "use_sliding_window", "max_window_layers"})
    CHECK_MESSAGE(listed(qwen.ignored, key), key);
  const HfModel gpt2 = load(kGpt2);
  for (const char* key : {"n_ctx", "attn_pdrop", "summary_type", "task_specific_params", "layer_norm_epsilon"})
    CHECK_MESSAGE(listed(gpt2.ignored, key), key);
  CHECK_FALSE(listed(gpt2.ignored, "n_inner"));
}

TEST_CASE("hf_config: load_model reads a config.json, with notes") {
  const std::string path = fftest::fixture(kLlama);
  std::vector<std::string> notes;
  const ModelSpec m = load_model(path, &notes);
  const HfModel hf = load(kLlama);
  CHECK(to_json(m) == to_json(hf.model));
  std::string ignored;
  for (const auto& key : hf.ignored) ignored += (ignored.empty() ? "" : ", ") + key;
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == path + ": fields ignored (they cost nothing): " + ignored);
  CHECK(notes[1] == "seq_len 131072 from max_position_embeddings (--seq-len sets it)");

  notes.clear();
  CHECK(load_model(path, &notes, 8192).seq_len == 8192);
  REQUIRE(notes.size() == 2);
  CHECK(notes[1] == "seq_len 8192 from --seq-len (the file says 131072)");
  CHECK(load_model(path).hidden == 4096);  // notes are optional
}

TEST_CASE("hf_config: --seq-len over presets and model files") {
  std::vector<std::string> notes;
  CHECK(load_model("gpt-5b", &notes, 4096).seq_len == 4096);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "seq_len 4096 from --seq-len (the preset says 2048)");
  notes.clear();
  CHECK(load_model("gpt-5b", &notes, 2048).seq_len == 2048);
  CHECK(notes.empty());  // the same length: nothing to say
  CHECK(load_model("gpt-5b", &notes).seq_len == 2048);

  const std::filesystem::path f =
      std::filesystem::temp_directory_path() / ("fourfold-hf-" + std::to_string(::getpid()) + ".json");
  std::ofstream(f) << R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 2048})";
  notes.clear();
  CHECK(load_model(f.string(), &notes, 4096).seq_len == 4096);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "seq_len 4096 from --seq-len (the file says 2048)");
  std::filesystem::remove(f);
}
