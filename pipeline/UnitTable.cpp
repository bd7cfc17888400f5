//===- UnitTable.cpp - A planned module's units, as a table ---------------===//
#include "dialect/AttrNames.h"
#include "pipeline/UnitTable.h"

#include "dialect/FsdpOps.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::printUnitTable(ModuleOp module, llvm::raw_ostream &os) {
  int64_t world = 1;
  if (auto w = module->getAttrOfType<IntegerAttr>(mlir::fsdp::attrs::worldSize))
    world = w.getInt();
  StringRef strategy = "no-shard";
  if (auto s = module->getAttrOfType<StringAttr>(mlir::fsdp::attrs::strategy))
    strategy = s.getValue();
  os << llvm::format("%-14s %6s %12s %12s %14s  %s\n", "unit", "params",
                     "elements", "padded", "bytes/rank", "reshard");
  int64_t totalElems = 0, totalRank = 0;
  for (auto unit : module.getOps<UnitOp>()) {
    int64_t elems = 0, padded = 0, perRank = 0;
    for (Attribute a : unit.getParams()) {
      auto p = module.lookupSymbol<ParameterOp>(
          cast<FlatSymbolRefAttr>(a).getValue());
      elems += p.getTensorType().getNumElements();
    }
    bool flat = false;
    for (auto f : module.getOps<FlatParameterOp>()) {
      if (f.getUnit() != unit.getSymName())
        continue;
      flat = true;
      int64_t shard = f.getShardType().getDimSize(0);
      padded += shard * f.getGroupSizeAttr().getInt();
      perRank += shard * ((f.getShardType().getElementTypeBitWidth() + 7) / 8);
    }
    if (!flat) { // replicated
      padded = elems;
      perRank = elems * 4;
    }
    totalElems += elems;
    totalRank += perRank;
    os << llvm::format("%-14s %6zu %12lld %12lld %14lld  %s\n",
                       unit.getSymName().str().c_str(), unit.getParams().size(),
                       (long long)elems, (long long)padded, (long long)perRank,
                       flat ? (unit.getReshardAfterForward() ? "true" : "false")
                            : "-");
  }
  os << llvm::format("%-14s %6s %12lld %12s %14lld  (%s over %lld ranks)\n",
                     "total", "", (long long)totalElems, "",
                     (long long)totalRank, strategy.str().c_str(),
                     (long long)world);
}
