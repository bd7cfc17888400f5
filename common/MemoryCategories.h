//===- MemoryCategories.h - What an arena buffer holds ----------*- C++ -*-===//
//
// Header-only and dependency-free: fsdp-plan-memory classifies every arena
// buffer by these, the plan carries the bytes of each live after every
// instruction (`predicted.memory_by_category`), and fsdp-inspect's page
// stacks them in this order.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_MEMORYCATEGORIES_H
#define FSDP_COMMON_MEMORYCATEGORIES_H

#include <cstddef>
#include <iterator>
#include <string_view>

namespace fsdp {

enum class MemoryCategory {
  Inputs,       // the step's inputs (the batch)
  Gathered,     // all-gathered unit parameters
  Saved,        // forward values the reverse pass reads
  ForwardTemp,  // forward values dead by the loss
  Recomputed,   // activation checkpointing's recomputation
  Gradients,    // gradients reduced, accumulated or applied
  BackwardTemp, // everything else after the loss
};

/// The categories' names, in MemoryCategory's order.
constexpr const char *kMemoryCategories[] = {
    "inputs",
    "gathered parameters",
    "saved activations",
    "forward temporaries",
    "recomputed activations",
    "gradients",
    "backward temporaries",
};
constexpr size_t kMemoryCategoryCount = std::size(kMemoryCategories);

/// The position of the category named `name` (the last one if none is).
inline size_t memoryCategoryIndex(std::string_view name) {
  for (size_t i = 0; i < kMemoryCategoryCount; ++i)
    if (name == kMemoryCategories[i])
      return i;
  return kMemoryCategoryCount - 1;
}

} // namespace fsdp

#endif // FSDP_COMMON_MEMORYCATEGORIES_H
