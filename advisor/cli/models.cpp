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
    Table t({"<name", "layers", "hidden", "heads", "ffn", "vocab (padded)", "seq", "parameters"});
    for (const auto& m : preset_models()) {
      out.push_back({{"name", m.name}, {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
                     {"ffn", m.ffn}, {"vocab", m.vocab}, {"padded_vocab", m.padded_vocab}, {"seq_len", m.seq_len},
                     {"parameters", parameter_count(m)}});
      t.row({m.name, std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads),
             std::to_string(m.ffn), std::to_string(m.vocab) + " (" + std::to_string(m.padded_vocab) + ")",
             std::to_string(m.seq_len), fixed(parameter_count(m) / 1e9, 2) + " B"});
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << t.str()
              << "\nParameters as stored: embedding untied from the LM head, padded vocabulary, biases, LayerNorms,\n"
                 "learned positions. A model file (--model FILE.json) gives layers, hidden, heads, vocab, seq_len\n"
                 "and optionally ffn (default 4·hidden) and padded_vocab (default: vocab rounded up to 128).\n";
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
