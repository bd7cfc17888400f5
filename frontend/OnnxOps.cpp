//===- OnnxOps.cpp - One lowering per ONNX op type ------------------------===//
//
// Each lowering folds when every input is known at import time (and the
// result is small), and otherwise builds fsdp ops after checking shapes with
// the dialect's shape functions, so errors name the node. Attribute
// defaults and input-vs-attribute forms follow the ONNX spec for opsets
// 13-21.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxOpsSupport.h"

using namespace mlir;
using namespace mlir::fsdp;

const llvm::StringMap<LowerFn> &mlir::fsdp::onnxLowerings() {
  static const llvm::StringMap<LowerFn> table = [] {
    llvm::StringMap<LowerFn> t;
    onnx_ops::addElementwise(t);
    onnx_ops::addShapeOps(t);
    onnx_ops::addDataMovement(t);
    onnx_ops::addCompute(t);
    onnx_ops::addRecurrent(t);
    onnx_ops::addOrdering(t);
    onnx_ops::addResize(t);
    onnx_ops::addRandom(t);
    return t;
  }();
  return table;
}
