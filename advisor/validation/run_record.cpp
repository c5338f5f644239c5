#include "advisor/validation/run_record.hpp"

#include <vector>

#include "advisor/core/error.hpp"
#include "advisor/core/json_fields.hpp"
#include "advisor/core/measurement.hpp"

namespace ff::advisor {

using nlohmann::json;

// Time per step: the median over the steps after the first (which warms
// caches and allocations); compute and communication: their mean. On the
// paced device compute is the device's busy time, known by construction (the
// host's view of it, which includes waiting for the device, is kept as
// host_compute_s); the cpu device's record has device_s too, but there it is
// the host's own kernel time and not a separate clock.
json measured_of(const json& record, const std::string& origin) {
  Fields f(record, origin);
  const auto& steps = f.array("steps");
  if (steps.size() < 2) input_error(origin + ": " + std::to_string(steps.size()) + " steps recorded, need 2 or more");
  std::vector<double> times;
  double compute = 0, device = 0;
  // The paced device's time in every step kept (records before it have none).
  bool all_device = record.value("device", json::object()).value("name", "") == "paced";
  PerAxis<double> comm{};
  for (size_t i = 1; i < steps.size(); ++i) {
    Fields s(steps[i], origin, "steps[" + std::to_string(i) + "]");
    times.push_back(s.positive("time_s"));
    compute += s.number("compute_s");
    if (s.has("device_s")) device += s.number("device_s");
    else all_device = false;
    Fields c = s.object("comm_s");
    PerAxis<double> step = per_axis_numbers(c);
    for (int a = 0; a < kAxisCount; ++a) comm[a] += step[a];
  }
  double n = double(times.size());
  for (double& c : comm) c /= n;
  json m = {{"time_s", median(times)}, {"compute_s", compute / n}, {"comm_s", per_axis_json(comm)},
            {"steps_discarded", 1},
            {"bytes_per_step", record.value("bytes_per_step", json(nullptr))}};
  if (all_device) {
    m["host_compute_s"] = m["compute_s"];
    m["compute_s"] = m["device_s"] = device / n;
  }
  return m;
}

// The measurement in the record a run of `c` on `device` wrote; throws InputError.
json record_measured(const std::string& rec, const Config& c, const std::string& device,
                     const std::string& grad_dtype) {
  json record = read_json_file(rec);
  Fields f(record, rec);
  Fields config = f.object("config");
  if (config_from_json(config.json(), rec) != c) input_error(rec + ": the record's config is not the one launched");
  // Engines from before --grad-dtype accumulated in fp32 and say nothing.
  const std::string grads = config.has("grad_dtype") ? config.string("grad_dtype") : "fp32";
  if (grads != grad_dtype)
    input_error(rec + ": the record's grad_dtype is '" + grads + "', the run was launched with --grad-dtype " +
                grad_dtype);
  // Engines from before --device write no "device"; one that does must have
  // run on the device it was given.
  if (f.has("device") && f.object("device").string("name") != device)
    input_error(rec + ": the record's device is '" + f.object("device").string("name") + "', the run was launched with "
                "--device " + device);
  return measured_of(record, rec);
}

}  // namespace ff::advisor
