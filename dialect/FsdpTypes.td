//===- FsdpTypes.td - Types of the fsdp dialect ------------*- tablegen -*-===//
#ifndef FSDP_TYPES_TD
#define FSDP_TYPES_TD

include "dialect/FsdpDialect.td"

def Fsdp_FutureType : Fsdp_Type<"Future", "future"> {
  let summary = "The pending result of an asynchronous collective";
  let description = [{
    A collective started by `fsdp.all_gather_start`,
    `fsdp.reduce_scatter_start` or `fsdp.all_reduce` returns a future; the
    tensor becomes usable only through `fsdp.wait`. Separating start from
    wait is what lets the schedule overlap communication with compute.

    ```mlir
    %f = fsdp.all_gather_start %shard {group_size = 4 : i64}
        : tensor<8xf32> -> !fsdp.future<tensor<32xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // FSDP_TYPES_TD
