#pragma once
// The option groups the advisor's subcommands and the engine share, each
// written once: within a group a flag has one spelling, default, help and
// check, wherever it appears (tests/test_options.cpp holds every command to
// it). The configuration group says one configuration (predict prices it,
// the engine runs it); the pace group describes the paced device (validate
// prices it, the engine paces with it). The filter group, which narrows a
// search, is the advisor's alone (advisor/cli/filter_options.hpp).
#include <string>
#include <vector>

#include "advisor/core/config.hpp"
#include "advisor/core/device_pace.hpp"

namespace CLI {
class App;
}

namespace ff {

// The groups' headings in --help, and how the options test finds them.
inline constexpr const char* kConfigGroup = "Configuration";
inline constexpr const char* kPaceGroup = "Paced device";

struct ConfigFlags {
  std::string grid = "1,1,1,1";  // X,Y,Z,D (stages from `pipeline`) or X,Y,Z,P,D
  int pipeline = 1;
  std::string order = Order().str();
  int micro_batch = 1;
  // --recompute [none|selective|full] (bare: full); empty: not given.
  std::vector<std::string> recompute;
  bool no_recompute = false;
  bool offload = false;
  bool shard_optimizer = false;
  bool sequence_parallel = false;
  int virtual_stages = 1;
  std::string overlap = "none";
  bool operator==(const ConfigFlags&) const = default;
};
void add_config_options(CLI::App& app, ConfigFlags& f);
// --recompute's values: none given, none; bare, full; else the one named
// (throws InputError naming the flag).
Recompute recompute_flag(const std::vector<std::string>& values);
// The configuration the flags say (its dtype left at Config's default);
// throws InputError naming the flag.
Config config_of(const ConfigFlags& f);
// The flags that say `c`: --grid X,Y,Z,D and --pipeline P.
ConfigFlags config_flags(const Config& c);

// The paced device in the flags' units: GFLOP/s, GB/s, µs.
struct PaceFlags {
  double pace_gflops = kDefaultPaceGflops;
  double pace_gbps = kDefaultPaceGbps;
  double poll_us = kDefaultPollUs;
  double pace_host_gbps = kDefaultPaceHostGbps;
  bool operator==(const PaceFlags&) const = default;
};
void add_pace_options(CLI::App& app, PaceFlags& f);
DevicePace pace_of(const PaceFlags& f);
// Throws InputError naming the flag of a value that is not a number > 0.
void check_pace(const PaceFlags& f);
void set_pace(PaceFlags& f, const DevicePace& p);
// The first of the group's flags given on `app`'s command line, or "".
std::string pace_flag_given(const CLI::App& app);

// `value`, checked to be at least `min`; else InputError
// "FLAG VALUE: expected WHAT >= MIN", the one wording of every such check.
long long at_least(const char* flag, long long value, long long min, const char* what);

}  // namespace ff
