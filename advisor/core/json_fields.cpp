#include "advisor/core/json_fields.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace ff {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) input_error(path + ": cannot open (does the file exist and is it readable?)");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return nlohmann::json::parse(buf.str());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte locates the fault; a line number is what a person can find.
    std::string text = buf.str();
    size_t at = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
    input_error(path + ": malformed JSON near line " + std::to_string(line) + ": " + e.what());
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double: 1e309
    input_error(path + ": malformed JSON: " + e.what());
  }
}

Fields::Fields(const nlohmann::json& j, std::string origin, std::string path)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
  if (!j_.is_object())
    input_error(origin_ + ": " + (path_.empty() ? std::string("the top level") : "field '" + path_ + "'") +
                " must be a JSON object, got " + j_.type_name());
}

std::string Fields::where(const std::string& key) const { return origin_ + ": field '" + path(key) + "'"; }

void Fields::fail(const std::string& key, const std::string& expected) const {
  std::string got = has(key) ? std::string(", got ") + j_.at(key).dump() : std::string(" (missing)");
  if (got.size() > 80) got = got.substr(0, 77) + "...";
  input_error(where(key) + ": expected " + expected + got);
}

namespace {

// Edit distance (insertions, deletions, substitutions): how far a misspelling is.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<double> Fields::microseconds(const std::string& key, const std::string& expected) const {
  if (!has(key)) return std::nullopt;
  const double us = number(key);
  if (us < 0) fail(key, expected);
  return us * 1e-6;
}

void Fields::only(const std::vector<const char*>& known) const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    const std::string& key = it.key();
    if (key == "comment" || key == "source") continue;
    const char* closest = nullptr;
    size_t best = 0;
    bool found = false;
    for (const char* k : known) {
      if (key == k) found = true;
      const size_t d = distance(key, k);
      if (!closest || d < best) closest = k, best = d;
    }
    if (found) continue;
    std::string hint = closest && best <= std::max<size_t>(2, key.size() / 3)
                           ? std::string(" (did you mean '") + closest + "'?)"
                           : "";
    std::string names;
    for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    input_error(where(key) + ": unknown field" + hint + "; known: " + names + " (and \"comment\" for notes)");
  }
}

bool Fields::has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

const nlohmann::json& Fields::get(const std::string& key) const {
  if (!has(key)) input_error(where(key) + " is missing");
  return j_.at(key);
}

Fields Fields::object(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_object()) fail(key, "an object");
  return Fields(v, origin_, path(key));
}

const nlohmann::json& Fields::array(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_array()) fail(key, "an array");
  return v;
}

double Fields::number(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "a number");
  return v.get<double>();
}

double Fields::positive(const std::string& key) const {
  double v = number(key);
  if (!(v > 0)) fail(key, "a number > 0");
  return v;
}

double Fields::fraction(const std::string& key) const {
  double v = number(key);
  if (v < 0 || v > 1) fail(key, "a number between 0 and 1");
  return v;
}

long long Fields::integer(const std::string& key, long long min) const {
  const auto& v = get(key);
  std::string expected = "an integer >= " + std::to_string(min);
  if (!v.is_number()) fail(key, expected);
  double d = v.get<double>();
  if (d != std::floor(d) || d < static_cast<double>(min)) fail(key, expected);
  // Every count the files hold is kept in an int: a larger one would wrap.
  if (d > std::numeric_limits<int>::max())
    fail(key, expected + " and at most " + std::to_string(std::numeric_limits<int>::max()));
  return static_cast<long long>(d);
}

std::string Fields::string(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_string()) fail(key, "a string");
  return v.get<std::string>();
}

double Fields::number_or(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

long long Fields::integer_or(const std::string& key, long long min, long long fallback) const {
  return has(key) ? integer(key, min) : fallback;
}

bool Fields::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = get(key);
  if (!v.is_boolean()) fail(key, "true or false");
  return v.get<bool>();
}

}  // namespace ff
