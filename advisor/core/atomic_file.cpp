#include "advisor/core/atomic_file.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "advisor/core/error.hpp"

namespace ff {

namespace {
// Holds Ctrl-C and SIGTERM back while a file is written and renamed, so an
// interrupt never leaves a temporary behind; it takes effect right after.
struct DeferSignals {
  sigset_t old;
  DeferSignals() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, &old);
  }
  ~DeferSignals() { sigprocmask(SIG_SETMASK, &old, nullptr); }
};
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  DeferSignals defer;
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) input_error(path + ": cannot write (" + std::strerror(errno) + ")");
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      input_error(path + ": write failed (" + std::strerror(errno) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    input_error(path + ": cannot replace (" + std::strerror(err) + ")");
  }
}

}  // namespace ff
