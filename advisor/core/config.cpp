#include "advisor/core/config.hpp"

#include <sstream>

#include "advisor/core/json_fields.hpp"

namespace ff {

const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::BF16: return "bf16";
    case Dtype::FP16: return "fp16";
    case Dtype::FP32: return "fp32";
  }
  return "";
}

Dtype parse_dtype(const std::string& s) {
  if (s == "bf16") return Dtype::BF16;
  if (s == "fp16") return Dtype::FP16;
  if (s == "fp32") return Dtype::FP32;
  input_error("'" + s + "': expected bf16, fp16 or fp32");
}

std::string Overlap::str() const {
  std::string s;
  if (oar) s += "oar";
  if (ors) s += s.empty() ? "ors" : ",ors";
  if (oag) s += s.empty() ? "oag" : ",oag";
  if (odp) s += s.empty() ? "odp" : ",odp";
  if (otp) s += s.empty() ? "otp" : ",otp";
  return s.empty() ? "none" : s;
}

Overlap parse_overlap(const std::string& s) {
  Overlap o;
  if (s == "none" || s.empty()) return o;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part == "oar") o.oar = true;
    else if (part == "ors") o.ors = true;
    else if (part == "oag") o.oag = true;
    else if (part == "odp") o.odp = true;
    else if (part == "otp") o.otp = true;
    else if (part == "all") o.oar = o.ors = o.oag = true;
    else input_error("'" + s + "': unknown '" + part + "' (expected a list of oar, ors, oag, odp, otp; or none, all)");
  }
  return o;
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& s) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (s == recompute_name(r)) return r;
  input_error("'" + s + "': expected none, selective or full");
}

nlohmann::json to_json(const Config& c) {
  nlohmann::json grid = nlohmann::json::object();
  for (Axis a : kAxes) grid[axis_name(a)] = c.grid.size(a);
  return {{"grid", grid},
          {"order", c.order.str()},
          {"micro_batch", c.micro_batch},
          {"recompute", recompute_name(c.recompute)},
          {"overlap",
           {{"oar", c.overlap.oar},
            {"ors", c.overlap.ors},
            {"oag", c.overlap.oag},
            {"odp", c.overlap.odp},
            {"otp", c.overlap.otp}}},
          {"dtype", dtype_name(c.dtype)},
          {"offload", c.offload},
          {"shard_optimizer", c.shard_optimizer},
          {"sequence_parallel", c.sequence_parallel},
          {"virtual_stages", c.virtual_stages}};
}

std::string config_label(const Config& c) {
  const char* rc[] = {" ", " src ", " rc "};  // none, selective, full
  return c.grid.label() + " " + c.order.str() + " mb" + std::to_string(c.micro_batch) + rc[int(c.recompute)] +
         c.overlap.str() + (c.offload ? " offload" : "") + (c.shard_optimizer ? " zero1" : "") +
         (c.sequence_parallel ? " sp" : "") + (c.virtual_stages > 1 ? " v" + std::to_string(c.virtual_stages) : "");
}

nlohmann::json per_axis_json(const PerAxis<double>& v) {
  nlohmann::json j = nlohmann::json::object();
  for (Axis a : kAxes) j[axis_name(a)] = v[static_cast<int>(a)];
  return j;
}

PerAxis<double> per_axis_numbers(const Fields& f) {
  PerAxis<double> v{};
  for (Axis a : kAxes)
    v[static_cast<int>(a)] = a == Axis::P && !f.has(axis_name(a)) ? 0 : f.number(axis_name(a));
  return v;
}

Config config_from_json(const nlohmann::json& j, const std::string& origin) {
  Fields f(j, origin);
  Config c;
  Fields g = f.object("grid");
  // Records written before stages existed have no "pipe": one stage.
  for (Axis a : kAxes) c.grid[a] = a == Axis::P && !g.has(axis_name(a)) ? 1 : int(g.integer(axis_name(a), 1));
  try {
    c.order = parse_order(f.string("order"));
  } catch (const InputError&) {
    f.fail("order", "a permutation of " + Order().str());
  }
  c.micro_batch = int(f.integer("micro_batch", 1));
  // Records written before selective recompute say true (full) or false.
  const nlohmann::json* rc = f.has("recompute") ? &f.json().at("recompute") : nullptr;
  if (rc && rc->is_boolean()) c.recompute = rc->get<bool>() ? Recompute::Full : Recompute::None;
  else if (rc && rc->is_string()) try {
      c.recompute = parse_recompute(rc->get<std::string>());
    } catch (const InputError&) {
      f.fail("recompute", "\"none\", \"selective\" or \"full\"");
    }
  else f.fail("recompute", "\"none\", \"selective\" or \"full\"");
  Fields o = f.object("overlap");
  for (auto [key, flag] : {std::pair{"oar", &c.overlap.oar}, {"ors", &c.overlap.ors}, {"oag", &c.overlap.oag}}) {
    if (!o.has(key) || !o.json().at(key).is_boolean()) o.fail(key, "true or false");
    *flag = o.json().at(key).get<bool>();
  }
  c.overlap.odp = o.boolean_or("odp", false);  // absent in records written before it
  c.overlap.otp = o.boolean_or("otp", false);
  std::string dt = f.string("dtype");
  if (dt != "bf16" && dt != "fp16" && dt != "fp32") f.fail("dtype", "\"bf16\", \"fp16\" or \"fp32\"");
  c.dtype = parse_dtype(dt);
  c.offload = f.boolean_or("offload", false);  // absent in records written before offload
  c.shard_optimizer = f.boolean_or("shard_optimizer", false);
  c.sequence_parallel = f.boolean_or("sequence_parallel", false);  // absent in records written before it
  c.virtual_stages = int(f.integer_or("virtual_stages", 1, 1));  // absent in records written before it
  return c;
}

}  // namespace ff
