//===- FsdpDialect.h - The fsdp dialect -------------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDPDIALECT_H
#define FSDP_DIALECT_FSDPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/FsdpOpsDialect.h.inc"

#endif // FSDP_DIALECT_FSDPDIALECT_H
