#pragma once
// Waiting for MPI by polling: MPI_Test, then sleep Δ, until done. This is how
// ranks that own a (paced) device wait: a rank that sleeps leaves its core to
// the ranks that compute, where MPI_Wait would spin on it. A sleeping rank
// makes no MPI progress, so Δ is part of what a collective costs; measure
// times collectives with the same Δ the engine waits with (MODEL.md §11).
#include <mpi.h>

namespace ff {

// Δ = poll_s; 0 waits in MPI_Wait(all) as usual.
void wait_polling(MPI_Request* req, double poll_s);
void waitall_polling(int n, MPI_Request* reqs, double poll_s);

// Sleeps of a few tens of µs need the kernel's timer slack at 1 µs (its
// default, 50 µs, would round every Δ up by that much).
void set_fine_timer_slack();

// Sleeps `seconds` (nothing for ≤ 0).
void sleep_for(double seconds);

}  // namespace ff
