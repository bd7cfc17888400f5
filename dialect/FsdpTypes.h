//===- FsdpTypes.h - Types of the fsdp dialect ------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDPTYPES_H
#define FSDP_DIALECT_FSDPTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "dialect/FsdpOpsTypes.h.inc"

#endif // FSDP_DIALECT_FSDPTYPES_H
