#pragma once
// Running another program the way `advisor validate` needs: argv split like
// a shell would (no shell), output to a log file, its own process group so a
// timeout or Ctrl-C ends the launcher and every rank it started.
#include <string>
#include <vector>

namespace ff::advisor {

// Words of `text`: blanks separate, '…' and "…" quote, backslash escapes.
// Throws InputError on an unclosed quote.
std::vector<std::string> split_words(const std::string& text);

// `name` with a '/' if it is an executable file, else the first executable
// `name` on PATH; "" when there is none.
std::string find_program(const std::string& name);

// SIGINT/SIGTERM/SIGHUP set a flag instead of ending the process, so the
// caller can stop the child and keep what it has.
void catch_interrupts();
bool interrupted();

struct ChildOutcome {
  int exit_code = -1;      // when it exited
  int signal = 0;          // when a signal ended it
  bool timed_out = false;
  bool interrupted = false;  // we stopped it because of an interrupt
  double seconds = 0;
};

// Runs argv with stdin from /dev/null and stdout+stderr appended to `log`;
// after `timeout_s` (or on an interrupt) sends its process group SIGTERM,
// then SIGKILL 5 s later. Throws InputError if it cannot be started.
ChildOutcome run_logged(const std::vector<std::string>& argv, const std::string& log, double timeout_s);

// The last `lines` lines of a file ("" if unreadable).
std::string file_tail(const std::string& path, int lines);

}  // namespace ff::advisor
