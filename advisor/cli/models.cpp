// advisor models / advisor machines: what the presets and bundled profiles are.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "advisor/cli/subcommands.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/core/model_spec.hpp"
#include "advisor/output/format.hpp"

namespace ff::advisor {

void setup_models(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("models", "List the preset models with their parameter counts");
  sub->add_flag("--json", *json, "Print JSON");
  sub->callback([json] {
    nlohmann::json out = nlohmann::json::array();
    Table t({"<name", "layers", "hidden", "heads", "kv", "ffn", "<block", "vocab (padded)", "seq", "parameters"});
    for (const auto& m : preset_models()) {
      nlohmann::json j = to_json(m);
      j["parameters"] = parameter_count(m);
      out.push_back(j);
      const std::string block = m.llama_feature().empty()
                                    ? "gpt"
                                    : std::string(m.mlp == Mlp::SwiGlu ? "swiglu" : "gelu") +
                                          (m.norm == Norm::RmsNorm ? " rmsnorm" : "") +
                                          (m.positions == Positions::Rope ? " rope" : "") + (m.bias ? "" : " no-bias") +
                                          (m.tied_embeddings ? " tied" : "");
      t.row({m.name, std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads),
             std::to_string(m.kv_head_count()), std::to_string(m.ffn), block,
             std::to_string(m.vocab) + " (" + std::to_string(m.padded_vocab) + ")", std::to_string(m.seq_len),
             fixed(parameter_count(m) / 1e9, 2) + " B"});
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << t.str()
              << "\nParameters as stored: padded vocabulary, the LM head unless tied; gpt blocks have biases,\n"
                 "LayerNorms and learned positions. A model file (--model FILE.json, MODEL.md §4) gives layers,\n"
                 "hidden, heads, vocab, seq_len and optionally ffn (default 4·hidden), padded_vocab (default: vocab\n"
                 "rounded up to 128) and the Llama fields kv_heads, head_dim, mlp, norm, positions, bias, qkv_bias,\n"
                 "tied_embeddings (MODEL.md §12); a Hugging Face config.json is read as it is.\n";
  });
}

void setup_machines(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("machines", "List the bundled machine profiles");
  sub->add_flag("--json", *json, "Print JSON");
  sub->callback([json] {
    nlohmann::json out = nlohmann::json::array();
    Table t({"<name", "GPUs/node", "bf16|fp16 TFLOP/s", "HBM GiB", "HBM GB/s", "node net GB/s", "<description"});
    for (const auto& name : bundled_machines()) {
      MachineProfile p = load_machine(name);
      out.push_back({{"name", p.name}, {"gpus_per_node", p.gpus_per_node}, {"description", p.description}});
      t.row({p.name + (name == default_machine() ? " (default)" : ""), std::to_string(p.gpus_per_node),
             fixed((p.peak_flops_bf16 > 0 ? p.peak_flops_bf16 : p.peak_flops_fp16) / 1e12, 1), gib(p.hbm_capacity), fixed(p.hbm_bandwidth / 1e9, 0),
             fixed(p.inter_node.busbw / 1e9, 0), p.description});
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << t.str() << "\nAny other machine: --machine FILE.json (profiles/README.md; measure/ writes them).\n";
  });
}

}  // namespace ff::advisor
