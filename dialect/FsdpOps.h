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

namespace mlir::fsdp {
/// What fsdp.attention and fsdp.attention_grad say of a query whose every
/// key is hidden (`safe_softmax`, `average_empty_rows`): checked alike.
LogicalResult verifyEmptyRows(Operation *op, Value mask, bool causal,
                              bool safe, bool average);
/// Their `layout`: "bhsd" or "bshd".
LogicalResult verifyAttentionLayout(Operation *op, StringRef layout);
/// The keys' sequence length of attention's k ([batch, heads, keys, d] in
/// layout "bhsd", [batch, keys, heads, d] in "bshd").
int64_t attentionKeyLength(RankedTensorType k, StringRef layout);
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDPOPS_H
