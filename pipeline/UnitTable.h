//===- UnitTable.h - A planned module's units, as a table -------*- C++ -*-===//
#ifndef FSDP_PIPELINE_UNITTABLE_H
#define FSDP_PIPELINE_UNITTABLE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {

/// One line per FSDP unit: parameters, elements, the flat buffer padded to
/// the group, bytes each rank stores, and reshard_after_forward.
void printUnitTable(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::fsdp

#endif // FSDP_PIPELINE_UNITTABLE_H
