//===- Elementwise.h - Elementwise kernels (device) -------------*- C++ -*-===//
//
// Elementwise kernels: unary (UnaryOps.def), binary, GELU, casts.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_KERNELS_ELEMENTWISE_H
#define FSDP_RUNTIME_DEVICE_KERNELS_ELEMENTWISE_H

#include "common/Philox.h"
#include "runtime/device/kernels/Block.h"

namespace fsdp::device {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The ops of common/UnaryOps.def, and GELU's two forms.
enum class UnaryKind {
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar) Class,
#include "common/UnaryOps.def"
#undef FSDP_UNARY
  Gelu,
  GeluTanh
};

FSDP_HD inline float unaryOp(UnaryKind k, float x) {
  switch (k) {
#define FSDP_UNARY(Class, name, onnx, aten, floatOnly, scalar)                 \
  case UnaryKind::Class:                                                       \
    return um::unary##Class(x);
#include "common/UnaryOps.def"
#undef FSDP_UNARY
  case UnaryKind::Gelu:
    return um::gelu(x);
  case UnaryKind::GeluTanh:
    return um::geluTanh(x);
  }
  return x;
}

/// y = dy * gelu'(x), all of one shape; each f32, bf16 or f16.
struct GeluGrad {
  bool tanhApprox;
  const void *x, *dy;
  void *y;
  ElemType tx = ElemType::F32, tdy = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    storeFloat(
        ty, y, i,
        um::geluGrad(tanhApprox, loadFloat(tx, x, i), loadFloat(tdy, dy, i)));
  }
};

/// y = op(x), one shape; each f32, bf16 or f16.
/// torch's dropout (the CPU kernel's draw, common/Philox.h): element i is
/// element offset + i of the global batch; the step is read at run time.
struct Dropout {
  uint64_t seed, offset;
  float p, scale;
  const double *step; // the step scalars (StepScalar): the draw's at kDrawStep
  const void *x;
  void *y;
  ElemType tx = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    bool keep =
        dropoutKeeps(seed, (uint64_t)step[kDrawStep], offset + (uint64_t)i, p);
    storeFloat(ty, y, i, keep ? loadFloat(tx, x, i) * scale : 0.0f);
  }
};

/// torch's rand (fsdp.uniform, the CPU kernel's draw): element i is element
/// offset + i of the global batch.
struct Uniform {
  uint64_t seed, offset;
  const double *step; // the step scalars (StepScalar)
  void *y;
  ElemType ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    int bits = ty == ElemType::BF16 ? 8 : ty == ElemType::F16 ? 11 : 24;
    storeFloat(ty, y, i,
               uniformDraw(seed, (uint64_t)step[kDrawStep],
                           offset + (uint64_t)i, bits));
  }
};

struct Unary {
  UnaryKind kind;
  const void *x;
  void *y;
  ElemType tx = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    storeFloat(ty, y, i, unaryOp(kind, loadFloat(tx, x, i)));
  }
};

enum class BinaryKind {
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer) Class,
#include "common/BinaryOps.def"
#undef FSDP_BINARY
};

/// The row of common/BinaryOps.def: in float for f32 tensors, in double
/// for integer, boolean and mixed ones.
template <typename T> FSDP_HD inline T binaryOp(BinaryKind k, T a, T b) {
  switch (k) {
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  case BinaryKind::Class:                                                      \
    return ::fsdp::um::binary##Class(a, b);
#include "common/BinaryOps.def"
#undef FSDP_BINARY
  }
  return a;
}

/// y = a op b in float, both broadcast to y (`index`: operands 0 and 1);
/// each f32, bf16 or f16.
struct Binary {
  BinaryKind kind;
  Strided index;
  const void *a, *b;
  void *y;
  ElemType ta = ElemType::F32, tb = ElemType::F32, ty = ElemType::F32;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    storeFloat(
        ty, y, i,
        binaryOp(kind, loadFloat(ta, a, off[0]), loadFloat(tb, b, off[1])));
  }
};

/// y = a op b on any element types, computed in double (shape arithmetic,
/// masks, comparisons).
struct BinaryMixed {
  BinaryKind kind;
  Strided index;
  ElemType ta, tb, ty;
  const void *a, *b;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    storeElem(ty, y, i,
              binaryOp<double>(kind, loadElem(ta, a, off[0]),
                               loadElem(tb, b, off[1])));
  }
};

/// The integer column of a common/BinaryOps.def row: exact on int64.
FSDP_HD inline int64_t integerOp(BinaryKind k, int64_t a, int64_t b) {
  switch (k) {
#define FSDP_BINARY(Class, name, onnx, kind, scalar, integer)                  \
  case BinaryKind::Class:                                                      \
    return ::fsdp::um::exact##Class(a, b);
#include "common/BinaryOps.def"
#undef FSDP_BINARY
  }
  return a;
}

/// y = a op b on two i64 tensors, exactly (positions, hashes, counts past
/// 2^53, where double rounds); y is i64, or i1 for a comparison.
struct BinaryInt {
  BinaryKind kind;
  Strided index;
  const int64_t *a, *b;
  void *y;
  bool boolean;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[2];
    index.offsets(i, off, 2);
    int64_t r = integerOp(kind, a[off[0]], b[off[1]]);
    if (boolean)
      static_cast<uint8_t *>(y)[i] = r != 0;
    else
      static_cast<int64_t *>(y)[i] = r;
  }
};

/// y = f(x) on an i64 tensor, exactly (neg, abs: um::integerUnary).
struct UnaryInt {
  bool abs;
  const int64_t *x;
  int64_t *y;
  FSDP_HD void operator()(int64_t i) const {
    y[i] = abs ? ::fsdp::um::exactAbs(x[i]) : ::fsdp::um::exactNeg(x[i]);
  }
};

/// Logical not of an i1 tensor (bytes).
struct LogicalNot {
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const { y[i] = !x[i]; }
};

/// out = cond ? x : y, all broadcast to out (`index`: cond, x, y), elements
/// of `elemBytes` bytes.
struct Select {
  Strided index;
  int64_t elemBytes;
  const uint8_t *cond, *x, *y;
  uint8_t *out;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off[3];
    index.offsets(i, off, 3);
    const uint8_t *src =
        cond[off[0]] ? x + off[1] * elemBytes : y + off[2] * elemBytes;
    copyElem(out + i * elemBytes, src, elemBytes);
  }
};

/// y = x converted element by element (through double, as the CPU does).
struct Cast {
  ElemType from, to;
  const void *x;
  void *y;
  FSDP_HD void operator()(int64_t i) const {
    storeElem(to, y, i, loadElem(from, x, i));
  }
};

/// y = scale * x broadcast to y (`index`: operand 0 is x).
struct Scaled {
  Strided index;
  float scale;
  const float *x;
  float *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t off;
    index.offsets(i, &off, 1);
    y[i] = scale * x[off];
  }
};

/// Keeps the upper (col - row >= k) or lower (col - row <= k) triangle of
/// each trailing [rows, cols] matrix, zeroes the rest.
struct Trilu {
  int64_t rows, cols, k;
  bool upper;
  int64_t elemBytes; // elements copied as bytes (int64 exactly), 0 as zeros
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    if (keep)
      copyElem(y + i * elemBytes, x + i * elemBytes, elemBytes);
    else
      for (int64_t b = 0; b < elemBytes; ++b)
        y[i * elemBytes + b] = 0;
  }
};

} // namespace fsdp::device

#endif // FSDP_RUNTIME_DEVICE_KERNELS_ELEMENTWISE_H
