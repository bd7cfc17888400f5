//===- DemoteFloat64.cpp - An ONNX graph's float64 computed in float32 ----===//
//
// torch.onnx.export (1.13) writes some float32 modules partly in float64:
// `torch.where(mask, 2.0, 0.5)` becomes a Where of two double constants,
// and the multiplications after it are cast to double, where PyTorch
// computes them in float32, its default dtype. No backend computes
// float64, so such a graph was refused. An ONNX graph's float64 values
// are computed in float32 instead, as PyTorch's module computes them,
// and a warning names the first node that said float64 and how many
// values did. A float64 parameter is refused: its stored bytes are
// doubles the weight loader would read as floats.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxImporter.h"

#include "dialect/FsdpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::fsdp;

LogicalResult mlir::fsdp::demoteFloat64(ModuleOp module) {
  Builder b(module.getContext());
  auto demoted = [&](Type t) -> Type {
    auto tt = dyn_cast<RankedTensorType>(t);
    if (!tt || !tt.getElementType().isF64())
      return Type();
    return RankedTensorType::get(tt.getShape(), b.getF32Type());
  };
  for (ParameterOp p : module.getOps<ParameterOp>())
    if (demoted(p.getTensorType()))
      return p.emitError("parameter '")
             << p.getSymName()
             << "' is float64, which no backend computes; export the model "
                "in float32";
  int64_t count = 0;
  Operation *first = nullptr;
  module.walk([&](Operation *op) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
      if (attr && demoted(attr.getType()))
        c.setValueAttr(attr.mapValues(b.getF32Type(), [](const APFloat &v) {
          APFloat f = v;
          bool lost;
          f.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                    &lost);
          return f.bitcastToAPInt();
        }));
    }
    for (Value r : op->getResults())
      if (Type t = demoted(r.getType())) {
        r.setType(t);
        ++count;
        first = first ? first : op;
      }
  });
  for (auto f : module.getOps<func::FuncOp>()) {
    for (BlockArgument arg : f.getArguments())
      if (Type t = demoted(arg.getType())) {
        arg.setType(t);
        ++count;
      }
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    f.setFunctionType(b.getFunctionType(
        f.getBody().front().getArgumentTypes(), ret.getOperandTypes()));
  }
  // A cast to float64 of a float32 value is now no cast at all.
  module.walk([](CastOp c) {
    if (c.getX().getType() == c.getType()) {
      c.getResult().replaceAllUsesWith(c.getX());
      c.erase();
    }
  });
  if (count)
    emitWarning(first ? first->getLoc() : module.getLoc())
        << count << " value(s) of the graph are float64, which no backend "
        << "computes; they are computed in float32, as PyTorch computes "
           "the module (torch.onnx.export writes Python scalars in "
           "torch.where and the products after them as double)";
  return success();
}
