//===- AllocationCounter.cpp - Count heap allocations on this thread
//-------===//
#include "runtime/support/AllocationCounter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local int64_t allocations = 0;

void *allocate(std::size_t size) {
  if (counting) {
    ++allocations;
    // FSDP_ALLOC_TRAP=1 (a diagnostic): stop at the first counted
    // allocation, so a debugger shows whose it is.
    if (std::getenv("FSDP_ALLOC_TRAP")) {
      counting = false;
      __builtin_trap();
    }
  }
  if (void *p = std::malloc(size ? size : 1))
    return p;
  throw std::bad_alloc();
}
} // namespace

void *operator new(std::size_t size) { return allocate(size); }
void *operator new[](std::size_t size) { return allocate(size); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

namespace fsdp {

void startCountingAllocations() {
  allocations = 0;
  counting = true;
}

int64_t stopCountingAllocations() {
  counting = false;
  return allocations;
}

AllocationPause::AllocationPause() : was(counting) { counting = false; }
AllocationPause::~AllocationPause() { counting = was; }

} // namespace fsdp
