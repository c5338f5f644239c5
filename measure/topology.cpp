#include "measure/topology.hpp"

#include <cblas.h>
#include <hwloc.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#ifndef FF_VERSION
#define FF_VERSION "unknown"
#endif

namespace ff::measure {

namespace {

int count_type(hwloc_topology_t t, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(t, type);
  return n < 0 ? 0 : n;
}

}  // namespace

nlohmann::json node_topology() {
  hwloc_topology_t t;
  nlohmann::json j = nlohmann::json::object();
  if (hwloc_topology_init(&t) != 0) return j;
  // I/O devices are filtered out by default; GPUs are I/O objects.
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return j;
  }
  j["cores"] = count_type(t, HWLOC_OBJ_CORE);
  j["hardware_threads"] = count_type(t, HWLOC_OBJ_PU);
  j["packages"] = count_type(t, HWLOC_OBJ_PACKAGE);
  j["numa_nodes"] = count_type(t, HWLOC_OBJ_NUMANODE);
  hwloc_obj_t root = hwloc_get_root_obj(t);
  j["memory_bytes_numa"] = double(root->total_memory);
  j["memory_bytes"] = node_memory_bytes();
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0))
    if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) j["cpu_model"] = model;
  nlohmann::json gpus = nlohmann::json::array();
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o)) != nullptr;) {
    bool gpu = o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU || o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC;
    if (!gpu) continue;
    nlohmann::json g = {{"name", o->name ? o->name : ""}};
    if (const char* model = hwloc_obj_get_info_by_name(o, "GPUModel")) g["model"] = model;
    if (const char* backend = hwloc_obj_get_info_by_name(o, "Backend")) g["backend"] = backend;
    gpus.push_back(g);
  }
  j["gpus"] = gpus;
  hwloc_topology_destroy(t);
  return j;
}

// The operating system's count: hwloc sums NUMA nodes, which some VMs
// report short of the real memory (8 of 24 GiB seen on the CI machine).
double node_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

nlohmann::json library_versions() {
  nlohmann::json v = nlohmann::json::object();
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string first_line(mpi, size_t(len));
  v["mpi"] = first_line.substr(0, first_line.find_first_of("\r\n,"));
  v["blas"] = std::string("OpenBLAS ") + openblas_get_config();
  v["fourfold"] = FF_VERSION;
  return v;
}

std::string host_name() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

namespace {

std::vector<std::string> process_args(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(f, arg, '\0')) args.push_back(arg);
  return args;
}

std::string join(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    bool plain = !a.empty() && a.find_first_of(" \t'\"$\\;&|<>*?") == std::string::npos;
    s += (s.empty() ? "" : " ") + (plain ? a : "'" + a + "'");
  }
  return s;
}

}  // namespace

std::string launch_command(int argc, char** argv) {
  // Thread counts change what a rank measures, so they belong to the command.
  std::string env;
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* v = std::getenv(name)) env += std::string(name) + "=" + v + " ";
  std::vector<std::string> parent = process_args(getppid());
  if (!parent.empty()) {
    std::string tool = parent[0].substr(parent[0].find_last_of('/') + 1);
    if (tool == "mpirun" || tool == "mpiexec" || tool == "orterun" || tool == "srun") return env + join(parent);
  }
  return env + join(std::vector<std::string>(argv, argv + argc));
}

}  // namespace ff::measure
