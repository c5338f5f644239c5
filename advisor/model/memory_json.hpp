#pragma once
// The memory model's terms as JSON: `advisor predict --json`'s memory_bytes,
// and the engine record's prediction beside what it measured.
#include <nlohmann/json.hpp>

#include "advisor/model/memory_model.hpp"

namespace ff {

nlohmann::json memory_json(const MemoryUse& u);

}  // namespace ff
