#pragma once
// What machine this is: hwloc's view of the node, the library versions, and
// how many ranks share a node.
#include <mpi.h>

#include <string>

#include <nlohmann/json.hpp>

namespace ff::measure {

// Cores, hardware threads, NUMA nodes, memory, CPU model and GPUs, from hwloc.
nlohmann::json node_topology();
// "mpi", "blas", "fourfold" always; "nccl", "cuda" in CUDA builds.
nlohmann::json library_versions();
double node_memory_bytes();  // the OS's physical memory; 0 if unknown
std::string host_name();
std::string utc_now();       // ISO 8601

// The launch line: the parent's command line when it is the launcher
// (mpirun, mpiexec, srun), else this process' own arguments; prefixed with
// OPENBLAS_NUM_THREADS / OMP_NUM_THREADS when set.
std::string launch_command(int argc, char** argv);

}  // namespace ff::measure
