#pragma once
// Reading JSON with errors a person can act on: which file, which field,
// what was expected, what was found.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/core/error.hpp"

namespace ff {

// Parses a whole file; throws InputError "FILE: ..." when unreadable or malformed.
nlohmann::json read_json_file(const std::string& path);

// A field of an object, addressed for messages as "origin: field 'path'".
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string origin, std::string path = "");
  bool has(const std::string& key) const;
  Fields object(const std::string& key) const;
  const nlohmann::json& array(const std::string& key) const;
  double number(const std::string& key) const;            // finite
  double positive(const std::string& key) const;          // > 0
  double fraction(const std::string& key) const;          // in [0, 1]
  long long integer(const std::string& key, long long min) const;  // and <= INT_MAX
  std::string string(const std::string& key) const;
  double number_or(const std::string& key, double fallback) const;
  long long integer_or(const std::string& key, long long min, long long fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  // A field in microseconds >= 0, in seconds, or nothing where absent; else
  // fail(key, expected).
  std::optional<double> microseconds(const std::string& key, const std::string& expected) const;
  std::string where(const std::string& key) const;        // "origin: field 'a.b.key'"
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;
  // Refuses a field that is neither in `known` nor "comment"/"source" (where
  // documentation belongs), naming it and the closest known name: a misspelt
  // field must not be read as absent.
  void only(const std::vector<const char*>& known) const;
  const nlohmann::json& json() const { return j_; }
  const std::string& origin() const { return origin_; }
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  const nlohmann::json& j_;
  std::string origin_, path_;
  const nlohmann::json& get(const std::string& key) const;
};

}  // namespace ff
