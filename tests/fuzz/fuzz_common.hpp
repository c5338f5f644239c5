#pragma once
// What every fuzz target shares. A target feeds one input to one of the
// loaders a user feeds files to, the way the advisor does (a file on disk,
// the same subcommand), and judges the outcome:
//  - ff::InputError (exit 2 with a message) or ff::NoConfigError (exit 3)
//    is the right answer to a bad file;
//  - any other exception, a crash, a sanitizer report or a hang is a finding;
//  - so is an accepted file whose output holds a time that is NaN, infinite
//    (nlohmann::json writes both as null) or negative, or a profile written
//    that the advisor then refuses.
// A finding prints what it is and aborts, which libFuzzer and the replay
// runner (replay_main.cpp) both report with the input that caused it.
// No heavy headers here: the targets compile in moments.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fuzz {

// A file in this process's scratch directory ($TMPDIR or /tmp), removed at
// exit; `name` decides what the loader may read from the name (a .json
// ending, "all_reduce_perf" in an nccl-tests log's name).
std::string scratch(const std::string& name);
void write_file(const std::string& path, const uint8_t* data, size_t size);

// The advisor's main() on argv (without the program name): its subcommands,
// its exit codes for the errors it expects (2 for ff::InputError, 3 for
// ff::NoConfigError), 0 otherwise; stdout and stderr captured, not printed,
// the error's message at the end of stderr as main() prints it.
// Any other exception is a finding.
struct CliRun {
  int code = 0;
  std::string out, err;
};
CliRun advisor(const std::vector<std::string>& argv);

// Runs `body`; ff::InputError is a clean refusal (false), any other
// exception a finding; true when the body finished.
bool accepts(const std::function<void()>& body);

[[noreturn]] void finding(const std::string& what);

// `what`'s stdout is JSON in which every value under a key naming a time
// ("…_s", "…_us", "…seconds", "days") is a number >= 0: not null (NaN and
// inf are written as null), not negative. With `no_nulls`, no value anywhere
// may be null. `positive` names keys whose values must be > 0.
void check_json_output(const CliRun& r, const std::string& what, bool no_nulls = false,
                       const std::vector<std::string>& positive = {});

// The same on a JSON value the code built (where: how to name it).
void check_times(const nlohmann::json& j, const std::string& where);

// The profile a subcommand wrote loads (ff::load_machine); a finding if not.
void check_profile_loads(const std::string& path, const std::string& writer);

}  // namespace fuzz
