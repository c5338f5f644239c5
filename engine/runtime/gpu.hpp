#pragma once
// What every CUDA user of this project needs, below both measure/ and the
// engine: finding this rank's GPU, an NCCL communicator over an MPI group,
// and the versions and memory a record reports. Host APIs only: no nvcc.
#include <mpi.h>
#include <nccl.h>

#include <string>

#include <nlohmann/json.hpp>

namespace ff::cuda {

// Local rank i of `node_comm` (the ranks sharing this host) takes GPU i.
// Returns false, with `why` set, where there is no usable GPU or more ranks
// than GPUs on the node.
bool select_local_gpu(MPI_Comm node_comm, std::string* why);

// An NCCL communicator over the ranks of `comm`, in their MPI order (the id
// made by rank 0, carried by MPI). Every rank of `comm` calls it.
ncclComm_t nccl_comm_of(MPI_Comm comm);

nlohmann::json versions();   // {"nccl": "2.x.y", "cuda": "12.z"}, what is found
double device_memory_bytes();  // this rank's GPU; 0 when none

}  // namespace ff::cuda
