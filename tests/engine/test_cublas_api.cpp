// cuBLAS opened on first use (engine/cuda/cublas_api.hpp): a process that
// never calls it never maps it, and the library it opens is the toolkit's
// the binary was built with. Needs no GPU: loading and querying the
// library's version touch no device.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "engine/runtime/cublas_api.hpp"

namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(library) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("cuBLAS is mapped only once it is first used, and is the version of the headers") {
  CHECK_FALSE(mapped("libcublas"));
  const ff::cuda::Cublas& c = ff::cuda::cublas();
  CHECK(mapped("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)));
  int major = -1, minor = -1;
  REQUIRE(c.get_property(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(c.get_property(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS);
  CHECK(major == CUBLAS_VER_MAJOR);
  CHECK(minor == CUBLAS_VER_MINOR);
}
