//===- FsdpDialect.cpp - The fsdp dialect ---------------------------------===//
#include "dialect/FsdpDialect.h"
#include "dialect/FsdpOps.h"
#include "dialect/FsdpTypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "dialect/FsdpInterfaces.cpp.inc"
#include "dialect/FsdpOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/FsdpOpsTypes.cpp.inc"

void FsdpDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/FsdpOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/FsdpOpsTypes.cpp.inc"
      >();
}
