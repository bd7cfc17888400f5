//===- MergeUnits.cpp - Coarser FSDP units --------------------------------===//
//
// merge-units=K merges every K consecutive units (in module order, which is the
// wrap policy's block order) into one; the root unit stays alone. Fewer,
// larger units mean fewer collectives (less latency paid per step) and more
// bytes gathered at once (more memory): the wrap-granularity knob of
// `--autotune`, and `--merge-units=K` on the command line.
//
// Before (merge-units=2):                  After:
//   fsdp.unit @h.0 {params = [@a]}     fsdp.unit @"h.0+h.1" {params = [@a, @b]}
//   fsdp.unit @h.1 {params = [@b]}     fsdp.unit @root {params = [@c]}
//   fsdp.unit @root {params = [@c]}
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialect/FsdpOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMERGEUNITS
#include "passes/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct FsdpMergeUnits : fsdp::impl::FsdpMergeUnitsBase<FsdpMergeUnits> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (group < 1) {
      module.emitError("--merge-units must be at least 1, got ")
          << (int64_t)group;
      return signalPassFailure();
    }
    if (group == 1)
      return;
    SmallVector<UnitOp> units;
    for (UnitOp unit : module.getOps<UnitOp>())
      if (unit.getSymName() != "root")
        units.push_back(unit);
    if (units.empty()) {
      module.emitError("--merge-units needs fsdp.unit ops: run "
                       "fsdp-wrap-units first");
      return signalPassFailure();
    }
    for (size_t first = 0; first < units.size(); first += group) {
      size_t last = std::min<size_t>(first + group, units.size());
      if (last - first < 2)
        continue;
      std::string name;
      SmallVector<Attribute> params;
      bool reshard = false;
      for (size_t i = first; i < last; ++i) {
        name += (i == first ? "" : "+") + units[i].getSymName().str();
        llvm::append_range(params, units[i].getParams());
        reshard |= units[i].getReshardAfterForward();
      }
      OpBuilder b(units[first]);
      UnitOp::create(b, units[first].getLoc(), b.getStringAttr(name),
                     b.getArrayAttr(params), b.getBoolAttr(reshard),
                     /*reshard_to=*/IntegerAttr());
      for (size_t i = first; i < last; ++i)
        units[i].erase();
    }
  }
};

} // namespace
