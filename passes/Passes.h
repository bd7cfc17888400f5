//===- Passes.h - fsdp passes -----------------------------------*- C++ -*-===//
#ifndef FSDP_PASSES_PASSES_H
#define FSDP_PASSES_PASSES_H

#include "dialect/FsdpDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::fsdp

#endif // FSDP_PASSES_PASSES_H
