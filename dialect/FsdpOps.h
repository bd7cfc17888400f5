//===- FsdpOps.h - Ops of the fsdp dialect ----------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDPOPS_H
#define FSDP_DIALECT_FSDPOPS_H

#include "dialect/FsdpDialect.h"
#include "dialect/FsdpTypes.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/FsdpInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/FsdpOps.h.inc"

#endif // FSDP_DIALECT_FSDPOPS_H
