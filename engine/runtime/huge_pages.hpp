#pragma once
// An allocator for the engine's large arrays (parameters, gradients, moments,
// activations) that asks Linux for transparent huge pages. With 4 KiB pages,
// GPT-2 124M's 2 GB of parameter state costs ~500k page faults at start-up
// (most of its time, in the kernel) and TLB misses on every pass over it;
// 2 MiB pages cut both by 512. Debian's default THP mode is "madvise": only
// memory that asks gets them. Small arrays go through operator new as usual.
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace ff::engine {

// Another home for the engine's arrays: a GPU device's memory that the host
// can also address (the cuda device installs managed memory), so the one
// schedule and its host-side bookkeeping (initialisation, reading the
// parameters back) run unchanged. Process-wide, as CUDA's current device is:
// installed once, by the device, before any array exists, since an array is
// returned to the memory it came from.
struct BufferMemory {
  void* (*allocate)(size_t bytes);
  void (*deallocate)(void* p, size_t bytes);
  // Memory that comes zero-filled where it lives: an element of value zero
  // is not written. On a GPU that keeps the host from touching (and so
  // pulling to itself) every page of every zero-initialised array.
  bool zeroed = false;
};
struct BufferMemoryState {
  const BufferMemory* memory = nullptr;
  long live = 0;  // arrays allocated and not yet returned
};
inline BufferMemoryState& buffer_memory_state() {
  static BufferMemoryState state;
  return state;
}
// Throws std::logic_error if arrays already exist in another memory.
void install_buffer_memory(const BufferMemory* memory);

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
    BufferMemoryState& st = buffer_memory_state();
    T* p = st.memory ? static_cast<T*>(st.memory->allocate(n * sizeof(T))) : host_allocate(n);
    if (!p) throw std::bad_alloc();
    ++st.live;
    return p;
  }
  static T* host_allocate(size_t n) {
    if (n * sizeof(T) < kThreshold) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = mmap(nullptr, mapped_bytes(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, mapped_bytes(n), MADV_HUGEPAGE);  // advice only: without THP it is 4 KiB pages as before
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    BufferMemoryState& st = buffer_memory_state();
    --st.live;
    if (st.memory)
      st.memory->deallocate(p, n * sizeof(T));
    else if (n * sizeof(T) < kThreshold)
      ::operator delete(p);
    else
      munmap(p, mapped_bytes(n));
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (std::is_trivially_copyable_v<U> && sizeof...(Args) <= 1) {
      const BufferMemory* m = buffer_memory_state().memory;
      if (m && m->zeroed) {
        const U v(std::forward<Args>(args)...);  // value-initialised (zero) without an argument
        static constexpr unsigned char kZero[sizeof(U)] = {};
        if (std::memcmp(&v, kZero, sizeof(U)) != 0) ::new (static_cast<void*>(p)) U(v);
        return;
      }
    }
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace ff::engine
