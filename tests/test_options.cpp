// Every option of every advisor subcommand and of the engine, held to the
// rule of the option groups (advisor/core/option_groups.hpp): within a group
// a flag has one spelling, default and help; a flag two commands share comes
// from a group, or is listed below with why its meaning is the command's own;
// a flag in two groups keeps its meaning (the filter narrows to its values).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "advisor/cli/filter_options.hpp"
#include "advisor/cli/job_options.hpp"
#include "advisor/cli/subcommands.hpp"
#include "advisor/core/engine_args.hpp"
#include "advisor/core/option_groups.hpp"

namespace {

struct Seen {
  std::string command, group, help, default_str;
  bool flag = false;
  bool list = false;  // takes several values
};

// name → where it appears
std::map<std::string, std::vector<Seen>> every_option() {
  std::map<std::string, std::vector<Seen>> all;
  auto add = [&](const std::string& command, const CLI::App& app) {
    for (const CLI::Option* o : app.get_options()) {
      for (const std::string& l : o->get_lnames()) {
        if (l == "help") continue;
        all["--" + l].push_back({command, o->get_group(), o->get_description(), o->get_default_str(),
                                 o->get_expected_max() == 0, o->get_expected_max() > 1});
      }
    }
  };
  CLI::App advisor;
  ff::advisor::setup_all(advisor);
  for (const CLI::App* sub : advisor.get_subcommands([](const CLI::App*) { return true; }))
    add(sub->get_name(), *sub);
  CLI::App engine;
  ff::EngineArgs args;
  ff::add_engine_options(engine, args);
  add("engine", engine);
  return all;
}

std::set<std::string> commands_of(const std::vector<Seen>& seen) {
  std::set<std::string> commands;
  for (const Seen& s : seen) commands.insert(s.command);
  return commands;
}

const std::set<std::string> kSharedGroups = {ff::kConfigGroup, ff::kPaceGroup, ff::advisor::kFilterGroup,
                                             ff::advisor::kJobGroup};

// Flags two commands spell alike with each command's own meaning or default.
const std::map<std::string, const char*> kOwnMeaning = {
    {"--json", "each command prints its own document"},
    {"--plot", "each command draws its own picture"},
    {"--out", "calibrate writes a profile, validate a report"},
    {"--threads", "recommend's search, scaling's searches, bench's second run"},
    {"--tokens", "recommend's days column, scaling's days and GPU-hours"},
    {"--seed", "validate: the sample's shuffle; the engine: parameters and data order"},
    {"--steps", "validate: steps per run, the first discarded; the engine: optimizer steps"},
    {"--device", "validate drives the cpu or paced engine; the engine also has cuda"},
    {"--model", "validate and the engine run a small job: no default model, or a tiny one"},
    {"--machine", "validate prices with it; recommend and predict search on it"},
    {"--batch", "validate's default is 2 per rank, the engine's one micro-step"},
    {"--dtype", "the engine computes in fp32, bf16 or fp64; the advisor prices bf16, fp16 or fp32"},
    {"--grad-dtype", "the engine's default follows its dtype (fp64 in fp64) and it takes no fp16; the advisor's is fp32"},
    {"--seq-len", "the advisor's unset means the model's (and is refused as 0); the engine's 0 means the model's"},
    {"--stage-layers", "a job option of the advisor's, the engine's own: both pin the partition the same way"},
};

}  // namespace

TEST_CASE("options: within a group a flag has one spelling, default and help") {
  const auto all = every_option();
  int checked = 0;
  for (const auto& entry : all) {
    const std::string& name = entry.first;
    const std::vector<Seen>& seen = entry.second;
    std::map<std::string, const Seen*> first_in_group;
    for (const Seen& s : seen) {
      CAPTURE(name);
      CAPTURE(s.command);
      CHECK_FALSE(s.help.empty());
      if (!kSharedGroups.count(s.group)) continue;
      auto [it, fresh] = first_in_group.emplace(s.group, &s);
      if (fresh) continue;
      CHECK(s.help == it->second->help);
      CHECK(s.default_str == it->second->default_str);
      CHECK(s.flag == it->second->flag);
      CHECK(s.list == it->second->list);
      ++checked;
    }
  }
  // predict and the engine share the configuration; recommend and validate
  // the filters; validate and the engine the pace: each at least once.
  CHECK(checked >= 8 + 11 + 4);
}

TEST_CASE("options: a flag two commands share comes from a group or says why it does not") {
  const auto all = every_option();
  for (const auto& entry : all) {
    const std::string& name = entry.first;
    const std::vector<Seen>& seen = entry.second;
    bool outside_group = false;
    for (const Seen& s : seen) outside_group |= !kSharedGroups.count(s.group);
    if (commands_of(seen).size() < 2 || !outside_group) continue;
    CAPTURE(name);
    CHECK_MESSAGE(kOwnMeaning.count(name), name << " is declared by several commands outside the shared groups");
  }
  // The list holds nothing stale: each entry is still spelled by two commands.
  for (const auto& entry : kOwnMeaning) {
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(commands_of(all.at(name)).size() >= 2);
  }
}

TEST_CASE("options: a flag in the configuration and the filters keeps its meaning") {
  const auto all = every_option();
  int both = 0;
  for (const auto& entry : all) {
    const std::string& name = entry.first;
    const std::vector<Seen>& seen = entry.second;
    const Seen *config = nullptr, *filter = nullptr;
    for (const Seen& s : seen) {
      if (s.group == ff::kConfigGroup) config = &s;
      if (s.group == ff::advisor::kFilterGroup) filter = &s;
    }
    if (!config || !filter) continue;
    CAPTURE(name);
    ++both;
    CHECK(config->flag == filter->flag);             // a switch in both, or a value in both
    CHECK(filter->help.rfind("Only ", 0) == 0);      // the filter narrows to configurations with it
    if (!filter->flag && name != "--order" && name != "--overlap") CHECK(filter->list);  // a list of the values
  }
  // --micro-batch, --recompute, --no-recompute, --offload, --shard-optimizer, --sequence-parallel, --pipeline,
  // --virtual-stages, --order, --overlap
  CHECK(both == 10);
}

TEST_CASE("options: predict, validate and the engine show the groups they share") {
  const auto all = every_option();
  auto group_of = [&](const std::string& name, const std::string& command) {
    for (const Seen& s : all.at(name))
      if (s.command == command) return s.group;
    return std::string("(absent)");
  };
  for (const char* name : {"--grid", "--pipeline", "--order", "--micro-batch", "--recompute", "--offload",
                           "--shard-optimizer", "--overlap"}) {
    CAPTURE(name);
    CHECK(group_of(name, "predict") == ff::kConfigGroup);
    CHECK(group_of(name, "engine") == ff::kConfigGroup);
  }
  for (const char* name : {"--pace-gflops", "--pace-gbps", "--poll-us", "--pace-host-gbps"}) {
    CAPTURE(name);
    CHECK(group_of(name, "validate") == ff::kPaceGroup);
    CHECK(group_of(name, "engine") == ff::kPaceGroup);
  }
  for (const char* name : {"--micro-batch", "--max-micro-batch", "--recompute", "--no-recompute", "--offload",
                           "--no-offload", "--shard-optimizer", "--no-shard-optimizer", "--pipeline", "--order",
                           "--overlap"}) {
    CAPTURE(name);
    CHECK(group_of(name, "recommend") == ff::advisor::kFilterGroup);
    CHECK(group_of(name, "validate") == ff::advisor::kFilterGroup);
  }
}
