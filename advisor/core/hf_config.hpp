#pragma once
// A Hugging Face config.json read as a model: the file people already have
// for Llama, Mistral, Qwen 2 and GPT-2, without writing a model file by hand.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "advisor/core/model_spec.hpp"

namespace ff {

// What transformers writes beside the shape that changes no weight, FLOP or
// byte the model counts: token ids, numerics (epsilons, initialisation, RoPE's
// base and scaling), dropout on activations, inference switches, provenance.
// Read, listed in HfModel::ignored, never priced.
inline constexpr const char* kHfCostFreeFields[] = {
    "_name_or_path", "_attn_implementation_autoset", "architectures", "model_type", "transformers_version",
    "torch_dtype", "dtype", "bos_token_id", "eos_token_id", "pad_token_id", "tokenizer_class", "use_cache",
    "initializer_range", "rope_theta", "rope_scaling", "rms_norm_eps", "layer_norm_epsilon", "pretraining_tp",
    "max_window_layers", "quantization_config", "gradient_checkpointing", "output_past",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout", "task_specific_params", "n_ctx", "scale_attn_weights",
    "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx",
};

// The architectures read, in the order messages list them.
inline constexpr const char* kHfArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                                   "GPT2LMHeadModel"};

// A Hugging Face config.json: it names its "architectures" or "model_type"
// (a model file, whose fields are refused by name otherwise, never does).
bool is_hf_config(const nlohmann::json& j);

struct HfModel {
  ModelSpec model;
  std::vector<std::string> ignored;  // fields present that cost nothing, as the file orders them
  std::string seq_len_from;          // "--seq-len", or the file's field: "max_position_embeddings", "n_positions"
};

// seq_len > 0 overrides the file's context length. Throws InputError naming
// `origin` and the field: an unknown one (with the closest known name), an
// architecture not in kHfArchitectures, or a feature the model cannot price
// (mixture of experts, an active sliding window, biases on attention alone).
HfModel model_from_hf_config(const nlohmann::json& j, const std::string& origin, int seq_len);

}  // namespace ff
