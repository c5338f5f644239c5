#pragma once
// Lines a user can paste to run a configuration: this project's engine under
// mpirun or srun (block mapping, so the placement that runs is the one that
// was priced), AxoNN's ax.init, and Megatron-AxoNN's flags.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "advisor/core/job.hpp"
#include "advisor/core/machine_profile.hpp"

namespace ff {

struct LaunchLine {
  std::string name;  // "mpirun", "srun", "axonn", "megatron-axonn"
  std::string line;
  std::string note;  // a caveat, or empty
};

// `model_arg` is what the user passed to --model (a preset name or a file),
// `seq_len` what they passed to --seq-len (0: none). The engine's line runs
// what was priced on `machine`: its ranks per node, and under odp its
// gradient bucket size.
std::vector<LaunchLine> launch_lines(const Job& job, const std::string& model_arg, const MachineProfile& machine,
                                     const Config& c, int seq_len = 0);

// For people: "  name:\n    line\n    (note)\n" each. For programs:
// {name: {"line", "note"?}}.
std::string launch_text(const std::vector<LaunchLine>& lines);
nlohmann::json launch_json(const std::vector<LaunchLine>& lines);

}  // namespace ff
