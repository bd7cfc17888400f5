//===- FsdpDialect.td - The fsdp dialect -------------------*- tablegen -*-===//
#ifndef FSDP_DIALECT_TD
#define FSDP_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialect/FsdpInterfaces.td"

def Fsdp_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::mlir::fsdp";
  let summary = "Ahead-of-time planned Fully Sharded Data Parallel training";
  let description = [{
    The `fsdp` dialect carries a model from import to a runtime plan. Tensor
    ops describe the model (what ONNX lowers to); distribution ops describe
    where parameters live and when they move: `fsdp.parameter` symbols, FSDP
    units, asynchronous collectives returning `!fsdp.future` values that are
    completed by `fsdp.wait`, and explicit `fsdp.free`. Every shape is static:
    the compiler plans memory and time before anything runs.
  }];
  let useDefaultTypePrinterParser = 1;
}

// Every op can be priced by the cost model (CostOpInterface, with defaults
// from its tensor sizes); ops with a better formula declare it themselves
// and pass `defaultCost = 0`.
class Fsdp_Op<string mnemonic, list<Trait> traits = [], bit defaultCost = 1>
    : Op<Fsdp_Dialect, mnemonic,
         !if(defaultCost, !listconcat(traits, [CostOpInterface]), traits)>;

class Fsdp_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Fsdp_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

#endif // FSDP_DIALECT_TD
