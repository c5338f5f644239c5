#pragma once
// The run record as `advisor validate` reads it: the engine writes it
// (engine/record.cpp, run_record(); its fields are MODEL.md §3's), this reads
// back what a run measured. Kept apart from the subcommand so the fuzz
// targets and the tests read records as validate does.
#include <string>

#include <nlohmann/json.hpp>

#include "advisor/core/config.hpp"

namespace ff::advisor {

// What a record measured: time per step (the median over the steps after
// the first), compute and communication per axis (means), the bytes per
// step; on the paced device, the device's busy time as compute. Throws
// InputError naming `origin` and the field.
nlohmann::json measured_of(const nlohmann::json& record, const std::string& origin);

// The measurement in the record file `rec` that a run of `c` on `device`
// wrote with gradients in `grad_dtype`, checked to be that run's; throws
// InputError.
nlohmann::json record_measured(const std::string& rec, const Config& c, const std::string& device,
                               const std::string& grad_dtype = "fp32");

}  // namespace ff::advisor
