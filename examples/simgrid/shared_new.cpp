// LD_PRELOAD helper for collective_bench under SMPI (examples/simgrid/README.md,
// "Why a preload").
//
// SMPI's Open MPI ring reduce-scatter (reduce_scatter__ompi_ring) allocates,
// per rank, an accumulation buffer of the whole input with `new unsigned
// char[total]`, copies the send buffer into it and sends the ring's blocks out
// of it. At 1,024 simulated ranks and 1 GiB that is 1 TiB of resident memory
// and copies. SMPI_SHARED_MALLOC cannot reach a buffer the library allocates
// itself, so this preload replaces operator new[]: while the benchmark has a
// collective in flight (ffsim_alias_begin/end) every array allocation of at
// least 1 MiB returns one SMPI-shared region, the same one the benchmark passes
// as its large buffer. The copy into the accumulation buffer is then a copy
// onto itself (SMPI skips it), and the ring's sends come from shared memory
// (SMPI skips the payload copy). Only the contents change (they are garbage,
// as with any SMPI_SHARED_MALLOC); simulated times depend on sizes only.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
using shared_malloc_fn = void* (*)(size_t, const char*, int);
constexpr size_t kAliasFrom = size_t(1) << 20;
void* g_region = nullptr;
size_t g_region_bytes = 0;
int g_depth = 0;  // ranks inside a timed collective (SMPI runs them in one thread)
long g_aliased = 0;

void* plain(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

extern "C" {
// The region every large buffer aliases; allocated once with SMPI's shared
// malloc, so SMPI treats it as shared (no payload copies).
void* ffsim_region(size_t bytes) {
  if (g_region) {
    if (bytes > g_region_bytes) {
      std::fprintf(stderr, "ffsim_region: %zu bytes asked, %zu allocated\n", bytes, g_region_bytes);
      std::abort();
    }
    return g_region;
  }
  auto f = reinterpret_cast<shared_malloc_fn>(dlsym(RTLD_DEFAULT, "smpi_shared_malloc"));
  if (!f) {
    std::fprintf(stderr, "ffsim_region: smpi_shared_malloc not found (run under smpirun)\n");
    std::abort();
  }
  g_region = f(bytes, __FILE__, __LINE__);
  g_region_bytes = bytes;
  return g_region;
}
void ffsim_alias_begin() { ++g_depth; }
void ffsim_alias_end() { --g_depth; }
long ffsim_aliased() { return g_aliased; }
}

void* operator new[](size_t n) {
  if (g_depth > 0 && g_region && n >= kAliasFrom) {
    if (n > g_region_bytes) {
      std::fprintf(stderr, "shared_new: a %zu-byte array inside a collective exceeds the %zu-byte region\n", n,
                   g_region_bytes);
      std::abort();
    }
    ++g_aliased;
    return g_region;
  }
  return plain(n);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new[](n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete[](void* p) noexcept {
  if (p && p == g_region) return;  // the region lives until exit
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept { operator delete[](p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete[](p); }
