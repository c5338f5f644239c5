#pragma once
// ff::fatal and FF_FATAL (check.hpp) without MPI's header, for the code nvcc
// compiles (engine/cuda/*.cu, through cuda_check.hpp).
#include <string>

namespace ff {

[[noreturn]] void fatal(const char* file, int line, const std::string& what);

}  // namespace ff

#define FF_FATAL(what) ::ff::fatal(__FILE__, __LINE__, (what))
