#pragma once
// Lines a user can paste to run a configuration: this project's engine under
// mpirun or srun (block mapping, so the placement that runs is the one that
// was priced), AxoNN's ax.init, and Megatron-AxoNN's flags.
#include <string>
#include <vector>

#include "job.hpp"

namespace ff {

struct LaunchLine {
  std::string name;  // "mpirun", "srun", "axonn", "megatron-axonn"
  std::string line;
  std::string note;  // a caveat, or empty
};

// `model_arg` is what the user passed to --model (a preset name or a file).
std::vector<LaunchLine> launch_lines(const Job& job, const std::string& model_arg, int gpus_per_node,
                                     const Config& c);

}  // namespace ff
