#include "tests/fuzz/fuzz_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <typeinfo>

#include <nlohmann/json.hpp>

#include "advisor/cli/subcommands.hpp"
#include "advisor/core/error.hpp"
#include "advisor/core/machine_profile.hpp"

namespace fuzz {

namespace fs = std::filesystem;

namespace {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/ff-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    return tmpl;
  }();
  static const bool cleanup = [] {
    return std::atexit([] {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }) == 0;
  }();
  (void)cleanup;
  return dir;
}

// std::cout and std::cerr into strings for as long as it lives (finding()
// writes with stdio, so it is still seen).
struct Capture {
  std::ostringstream out, err;
  std::streambuf *old_out, *old_err;
  Capture() : old_out(std::cout.rdbuf(out.rdbuf())), old_err(std::cerr.rdbuf(err.rdbuf())) {}
  ~Capture() {
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
  }
};

bool time_key(const std::string& k) {
  return k.ends_with("_s") || k.ends_with("_us") || k.ends_with("seconds") || k == "days";
}

void walk(const nlohmann::json& j, const std::string& path, bool in_time, bool no_nulls,
          const std::vector<std::string>& positive) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (std::count(positive.begin(), positive.end(), k) &&
          !(it.value().is_number() && it.value().get<double>() > 0))
        finding(path + "." + k + " = " + it.value().dump() + ": expected a number > 0");
      walk(it.value(), path + "." + k, in_time || time_key(k), no_nulls, positive);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) walk(j[i], path + "[" + std::to_string(i) + "]", in_time, no_nulls, positive);
  } else if (j.is_null()) {
    if (in_time) finding(path + " is null: a time that was NaN or infinite");
    if (no_nulls) finding(path + " is null: a number that was NaN or infinite");
  } else if (j.is_number() && in_time) {
    double v = j.get<double>();
    if (!std::isfinite(v) || v < 0) finding(path + " = " + j.dump() + ": a negative or non-finite time");
  }
}

}  // namespace

std::string scratch(const std::string& name) { return scratch_dir() + "/" + name; }

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!f) {
    std::perror(("fuzz: cannot write " + path).c_str());
    std::abort();
  }
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\n==fuzz== FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool accepts(const std::function<void()>& body) {
  try {
    body();
    return true;
  } catch (const ff::InputError& e) {
    if (std::getenv("FUZZ_VERBOSE")) std::fprintf(stderr, "refused: %s\n", e.what());
    return false;
  } catch (const std::exception& e) {
    finding(std::string("an exception other than ff::InputError escaped: ") + typeid(e).name() + ": " + e.what());
  }
}

CliRun advisor(const std::vector<std::string>& argv) {
  // advisor/cli/main.cpp's subcommands and handlers.
  CLI::App app{"advisor"};
  ff::advisor::setup_all(app);
  std::vector<std::string> words = {"advisor"};
  words.insert(words.end(), argv.begin(), argv.end());
  std::vector<char*> cargv;
  for (auto& w : words) cargv.push_back(w.data());
  CliRun r;
  {
    Capture cap;
    try {
      app.parse(int(cargv.size()), cargv.data());
    } catch (const CLI::ParseError& e) {  // the target's own arguments
      finding(std::string("the target's arguments were refused: ") + e.what());
    } catch (const ff::NoConfigError& e) {
      r.code = 3;
      cap.err << "advisor: " << e.what() << "\n";
    } catch (const ff::InputError& e) {
      r.code = 2;
      cap.err << "advisor: error: " << e.what() << "\n";
    } catch (const std::exception& e) {
      finding(std::string("an exception other than ff::InputError escaped the advisor: ") + typeid(e).name() +
              ": " + e.what());
    }
    r.out = cap.out.str();
    r.err = cap.err.str();
  }
  // For looking at a corpus: which inputs are accepted, why others are not.
  static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::string cmd;
    for (const auto& a : argv) cmd += " " + a;
    std::fprintf(stderr, "advisor%s -> exit %d\n%s", cmd.c_str(), r.code, r.code ? r.err.c_str() : "");
  }
  return r;
}

void check_json_output(const CliRun& r, const std::string& what, bool no_nulls,
                       const std::vector<std::string>& positive) {
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) finding(what + " printed no JSON: " + r.out.substr(0, 200));
  walk(j, what, false, no_nulls, positive);
}

void check_times(const nlohmann::json& j, const std::string& where) { walk(j, where, false, false, {}); }

void check_profile_loads(const std::string& path, const std::string& writer) {
  if (!accepts([&] { ff::load_machine(path); })) finding(writer + " wrote a profile the advisor refuses");
}

}  // namespace fuzz
