//===- FsdpInterfaces.td - Interfaces of fsdp ops ----------*- tablegen -*-===//
#ifndef FSDP_INTERFACES_TD
#define FSDP_INTERFACES_TD

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op that reverse-mode autodiff can differentiate. Autodiff is one
    generic pass: it walks the forward function backwards and asks each op for
    its vector-Jacobian product, so adding an op never touches the pass.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradients of this op's
        operands given the gradients of its results (null where a result has
        no gradient). Appends one value per operand to `operandGrads`; a null
        value means the operand receives no gradient (e.g. integer indices).
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op the cost model can price: the floating-point operations it performs
    and the bytes it reads and writes, from static shapes only.
  }];
  let methods = [
    InterfaceMethod<[{
        Floating-point operations performed by one execution. The default,
        for elementwise ops, reductions and data movement, is one per
        element of the larger of its tensors (zero for ops without tensor
        results, such as collectives' starts, and for pure views).
      }],
      "int64_t", "getFlops", (ins), [{}], [{
        int64_t largest = 0;
        auto count = [&](::mlir::Type t) {
          if (auto tt = ::llvm::dyn_cast<::mlir::RankedTensorType>(t))
            largest = std::max<int64_t>(largest, tt.getNumElements());
        };
        for (::mlir::Type t : $_op->getResultTypes()) count(t);
        if (largest == 0) return 0;
        for (::mlir::Type t : $_op->getOperandTypes()) count(t);
        return largest;
      }]>,
    InterfaceMethod<"Bytes read plus bytes written by one execution.",
      "int64_t", "getBytesMoved", (ins), [{}], [{
        int64_t bytes = 0;
        auto count = [&](::mlir::Type t) {
          if (auto tt = ::llvm::dyn_cast<::mlir::RankedTensorType>(t))
            bytes += tt.getNumElements() *
                     ((tt.getElementTypeBitWidth() + 7) / 8);
        };
        for (::mlir::Type t : $_op->getOperandTypes()) count(t);
        for (::mlir::Type t : $_op->getResultTypes()) count(t);
        return bytes;
      }]>
  ];
}

#endif // FSDP_INTERFACES_TD
