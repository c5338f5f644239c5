#include "engine/runtime/mpi_poll.hpp"

#include <sys/prctl.h>
#include <time.h>

#include "engine/runtime/check.hpp"

namespace ff {

void sleep_for(double seconds) {
  if (seconds <= 0) return;
  timespec ts{};
  ts.tv_sec = time_t(seconds);
  ts.tv_nsec = long((seconds - double(ts.tv_sec)) * 1e9);
  nanosleep(&ts, nullptr);
}

void wait_polling(MPI_Request* req, double poll_s) { waitall_polling(1, req, poll_s); }

void waitall_polling(int n, MPI_Request* reqs, double poll_s) {
  if (poll_s <= 0) {
    MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    return;
  }
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    sleep_for(poll_s);
  }
}

void set_fine_timer_slack() { prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); }

}  // namespace ff
