#pragma once
// The one error type of the library: bad input (a file, a flag, a model that
// cannot be split). The CLI catches it at the edge, prints it, exits 2.
#include <stdexcept>
#include <string>

namespace ff {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The input is well-formed but no configuration can run it (nothing fits in
// memory): an answer, not a typo, so the CLI exits 3 rather than 2.
struct NoConfigError : InputError {
  using InputError::InputError;
};

[[noreturn]] inline void input_error(const std::string& what) { throw InputError(what); }

// What `parse()` returns; an InputError it throws comes back with `flag` in
// front. The library's parsers name the value, the CLI names the flag.
template <typename F>
auto flag_value(const std::string& flag, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const InputError& e) {
    input_error(flag + " " + e.what());
  }
}

}  // namespace ff
