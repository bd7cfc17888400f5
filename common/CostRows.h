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
// sides count the rows here, so they cannot drift apart. Likewise the loop
// a binary elementwise kernel takes (binaryPath), which the CPU kernel
// itself chooses by.
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

/// The CPU kernel's loop for a binary elementwise op on one float type
/// (common/BinaryOps.def; runtime/cpu/kernels/Elementwise.cpp): both
/// operands of the result's shape, one repeated along the leading
/// dimensions (a bias, a scale), a scalar operand, or any other broadcast
/// by strides, 10x slower per element on the project's Xeon (2.0 ns
/// against 0.19 for a mul), so the calibration fits it apart ("mul.strided").
enum class BinaryPath { Plain, Repeat, Scalar, Strided };

inline BinaryPath binaryPath(const int64_t *a, size_t ra, const int64_t *b,
                             size_t rb, const int64_t *y, size_t ry) {
  auto same = [&](const int64_t *s, size_t r) {
    if (r != ry)
      return false;
    for (size_t d = 0; d < r; ++d)
      if (s[d] != y[d])
        return false;
    return true;
  };
  // s equals y's trailing dimensions.
  auto trailing = [&](const int64_t *s, size_t r) {
    if (r > ry)
      return false;
    for (size_t d = 0; d < r; ++d)
      if (s[d] != y[ry - r + d])
        return false;
    return true;
  };
  bool aFull = same(a, ra), bFull = same(b, rb);
  if (aFull && bFull)
    return BinaryPath::Plain;
  if ((aFull && trailing(b, rb)) || (bFull && trailing(a, ra)))
    return BinaryPath::Repeat;
  int64_t bNumel = 1;
  for (size_t d = 0; d < rb; ++d)
    bNumel *= b[d];
  if (aFull && bNumel == 1)
    return BinaryPath::Scalar;
  return BinaryPath::Strided;
}

/// Whether `op` is a binary elementwise op (a row of common/BinaryOps.def).
inline bool isBinaryElementwise(std::string_view op) {
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  if (op == name)                                                              \
    return true;
#include "common/BinaryOps.def"
#undef FSDP_BINARY
  return false;
}

/// Loops over more elements than this run on every core of the CPU
/// backend (runtime/cpu/kernels/KernelSupport.h: kParallelMin is this);
/// smaller ones stay serial, where a thread hand-off costs more than it
/// saves.
constexpr int64_t kCpuParallelMin = 1 << 15;

/// AdamW's update (a square root and a division an element) is worth a
/// thread hand-off from far fewer elements: on the project's 2-core Xeon
/// (2026-11-28) it ran at 3.6 ns an element on one thread, and on both
/// 8.0 against 5.1 us at 2048 elements, 60 against 32 us at 16384. Its
/// kernel (runtime/cpu/kernels/Optimizers.cpp) splits from here on.
constexpr int64_t kCpuParallelMinAdamW = 1 << 11;

/// The element count above which `op`'s CPU loop runs on every core.
inline int64_t cpuParallelMin(std::string_view op) {
  return op == "adamw" ? kCpuParallelMinAdamW : kCpuParallelMin;
}

/// Whether an instruction of `op` whose largest tensor has `elements`
/// elements runs on one thread of the CPU backend (kCpuParallelMin): the
/// calibration fits those apart ("adamw.serial") and the simulator prices
/// them apart. A serial loop costs per element what a parallel one costs
/// on all the cores, and a cost fitted across both priced the small ones
/// at 0.75-0.9x what they took and an AdamW's at 0.3x (a demo's parameters
/// all update serially), the large ones up to 1.5x (2026-11-28, the
/// project's 2-core Xeon). Products and attention excepted: their loops
/// split otherwise (the GEMM library's own threads; heads and rows).
inline bool serialOnCpu(std::string_view op, int64_t elements) {
  if (op == "matmul" || op == "gemm" || op.substr(0, 4) == "conv" ||
      op.substr(0, 9) == "attention")
    return false;
  return elements > 0 && elements <= cpuParallelMin(op);
}

/// The variant of `op` the calibration fits apart and the simulator prices
/// apart: "strided" for a binary elementwise op on the CPU kernel's strided
/// loop (binaryPath) or on mixed types (its double loop, as slow); ""
/// otherwise. Keys read "mul.strided", "mul.strided.bf16".
inline std::string_view costVariant(std::string_view op, const int64_t *a,
                                    size_t ra, const int64_t *b, size_t rb,
                                    const int64_t *y, size_t ry, bool oneType) {
  if (!isBinaryElementwise(op))
    return "";
  if (!oneType || binaryPath(a, ra, b, rb, y, ry) == BinaryPath::Strided)
    return "strided";
  return "";
}

/// How many of fsdp-run's measured steps a calibration of this CPU needs
/// before their median corrects every compute time priced on it
/// (runtime/run/Calibration.cpp, `step_correction`), and fsdp-opt stops
/// saying an unreliable one is unreliable (costmodel/ThisMachine.cpp).
constexpr size_t kObservedStepsToCorrect = 3;

} // namespace fsdp

#endif // FSDP_COMMON_COSTROWS_H
