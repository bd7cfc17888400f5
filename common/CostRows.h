//===- CostRows.h - The rows a kernel's cost repeats over -------*- C++ -*-===//
//
// The calibration fits each op's cost on this CPU as a linear function of
// what the instruction does (runtime/inspect/FitDevice.cpp), and the
// simulator prices it with the same terms (costmodel/DeviceModel.cpp). For
// most ops those are a fixed cost per instruction, its flops and its bytes.
// The attention kernels also pay a cost per query row of each head (the
// online softmax's bookkeeping, a row's loop set-up), which for short rows
// outweighs their flops: on the project's 2-core Xeon a row took 0.08 us
// whatever its length from 24 to 64 and its head size from 16 to 32, so a
// fixed cost per instruction fitted to the large references priced a small
// model's attention at 1.4x what it took, and a large one's at 0.8x. Both
// sides count the rows here, so they cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMMON_COSTROWS_H
#define FSDP_COMMON_COSTROWS_H

#include <cstdint>
#include <string_view>

namespace fsdp {

/// The rows op's cost is fitted per, from its first operand's shape (the
/// queries [batch, heads, length, head size] of attention and
/// attention_grad: batch x heads x length); 0 for every other op.
inline int64_t costRows(std::string_view op, const int64_t *shape,
                        size_t rank) {
  if (op.substr(0, 9) != "attention" || rank < 2)
    return 0;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < rank; ++i)
    rows *= shape[i] > 0 ? shape[i] : 0;
  return rows;
}

} // namespace fsdp

#endif // FSDP_COMMON_COSTROWS_H
