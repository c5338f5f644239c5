#pragma once
// One file per subcommand: each binds its options to a struct and runs it
// from a callback.
#include <CLI/CLI.hpp>

namespace ff::advisor {

void setup_recommend(CLI::App& app);
void setup_predict(CLI::App& app);
void setup_models(CLI::App& app);
void setup_machines(CLI::App& app);
void setup_bench(CLI::App& app);
void setup_calibrate(CLI::App& app);
void setup_validate(CLI::App& app);

}  // namespace ff::advisor
