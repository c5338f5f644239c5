#pragma once
// One file per subcommand: each binds its options to a struct and runs it
// from a callback.
#include <CLI/CLI.hpp>

namespace ff::advisor {

void setup_recommend(CLI::App& app);
void setup_scaling(CLI::App& app);
void setup_predict(CLI::App& app);
void setup_models(CLI::App& app);
void setup_machines(CLI::App& app);
void setup_bench(CLI::App& app);
void setup_calibrate(CLI::App& app);
void setup_validate(CLI::App& app);

// Every subcommand, as the advisor binary has them (the fuzz targets drive the same).
inline void setup_all(CLI::App& app) {
  app.require_subcommand(1);
  setup_recommend(app);
  setup_scaling(app);
  setup_predict(app);
  setup_models(app);
  setup_machines(app);
  setup_bench(app);
  setup_calibrate(app);
  setup_validate(app);
}

}  // namespace ff::advisor
