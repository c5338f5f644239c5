#pragma once
// An allocator for the engine's large arrays (parameters, gradients, moments,
// activations) that asks Linux for transparent huge pages. With 4 KiB pages,
// GPT-2 124M's 2 GB of parameter state costs ~500k page faults at start-up
// (most of its time, in the kernel) and TLB misses on every pass over it;
// 2 MiB pages cut both by 512. Debian's default THP mode is "madvise": only
// memory that asks gets them. Small arrays go through operator new as usual.
#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace ff::engine {

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kThreshold = 2 * kHugePage;  // below it, a huge page would be mostly waste

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  static size_t mapped_bytes(size_t n) { return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage; }

  T* allocate(size_t n) {
    if (n * sizeof(T) < kThreshold) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = mmap(nullptr, mapped_bytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, mapped_bytes(n), MADV_HUGEPAGE);  // advice only: without THP it is 4 KiB pages as before
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kThreshold)
      ::operator delete(p);
    else
      munmap(p, mapped_bytes(n));
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace ff::engine
