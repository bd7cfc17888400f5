//===- Matchers.h - Small value matchers the fusion passes share -*- C++
//-*-===//
#ifndef FSDP_PASSES_MATCHERS_H
#define FSDP_PASSES_MATCHERS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace mlir::fsdp {

/// The value of a scalar (one-element) float constant.
inline std::optional<double> scalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1 ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

} // namespace mlir::fsdp

#endif // FSDP_PASSES_MATCHERS_H
