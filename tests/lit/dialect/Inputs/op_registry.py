"""The runtime's op tables against the dialect:

- common/UnaryOps.def (the elementwise unary ops' scalars) against
  dialect/FsdpTensorOps.td's Fsdp_UnaryOp definitions: every such op has a
  row with its class and mnemonic, and every row names one;
- common/BinaryOps.def against the Fsdp_BinaryOp definitions, the same
  way;
- common/Ops.def (every op a plan's program holds: the CPU and
  device dispatch, the compute-dtype rules) against every op of the
  dialect: each op that becomes an instruction has a row, and every row
  names an op.

Prints "agree N M" or each disagreement (and exits 1).

    op_registry.py ROOT
"""
import glob
import re
import sys

# Unary ops of the dialect that are not float elementwise math: their
# kernels are the logic ops'.
NOT_UNARY_MATH = {"Not"}
# Ops of the dialect that never become an instruction: symbols and views
# of storage the runtime already has (passes/EmitPlan.cpp).
NOT_INSTRUCTIONS = {"constant", "flat_parameter", "get_parameter", "get_shard",
                    "get_device_copy", "get_host_buffer", "host_buffer",
                    "param_view", "parameter", "read_grad", "unit",
                    "stop_gradient"}  # replaced by its operand once gradients are built


def main():
    root = sys.argv[1]
    td = open(f"{root}/dialect/FsdpTensorOps.td").read()
    unary_ops = dict(re.findall(r'def Fsdp_(\w+)Op\s*:\s*Fsdp_UnaryOp<"(\w+)"', td))
    all_ops = set()
    for path in glob.glob(f"{root}/dialect/*.td"):
        all_ops |= set(re.findall(r'def Fsdp_\w+\s*:\s*Fsdp_\w*Op<"(\w+)"', open(path).read()))
    binary_ops = dict(re.findall(r'def Fsdp_(\w+)Op\s*:\s*Fsdp_BinaryOp<"(\w+)"', td))
    binary_rows = dict(re.findall(r'^FSDP_BINARY\((\w+), "(\w+)"',
                                  open(f"{root}/common/BinaryOps.def").read(), re.M))
    unary_rows = dict(re.findall(r'^FSDP_UNARY\((\w+), "(\w+)"',
                                 open(f"{root}/common/UnaryOps.def").read(), re.M))
    op_rows = re.findall(r'^FSDP_OP\("(\w+)"', open(f"{root}/common/Ops.def").read(), re.M)
    problems = []
    for cls, name in sorted(unary_ops.items()):
        if cls in NOT_UNARY_MATH:
            continue
        if cls not in unary_rows:
            problems.append(f"fsdp.{name} (Fsdp_{cls}Op) has no row in UnaryOps.def")
        elif unary_rows[cls] != name:
            problems.append(f"row {cls} names '{unary_rows[cls]}', the dialect's op is '{name}'")
    for cls, name in sorted(unary_rows.items()):
        if cls not in unary_ops:
            problems.append(f"row {cls} ('{name}') names no Fsdp_UnaryOp of the dialect")
    for cls, name in sorted(binary_ops.items()):
        if binary_rows.get(cls) != name:
            problems.append(f"fsdp.{name} (Fsdp_{cls}Op) has no row {cls} in BinaryOps.def")
    for cls, name in sorted(binary_rows.items()):
        if binary_ops.get(cls) != name:
            problems.append(f"BinaryOps.def row {cls} ('{name}') names no Fsdp_BinaryOp")
        elif name not in op_rows:
            problems.append(f"BinaryOps.def row {cls} ('{name}') has no row in Ops.def")
    rows = list(op_rows) + list(unary_rows.values())
    if len(set(rows)) != len(rows):
        problems.append("Ops.def names an op twice: " +
                        ", ".join(sorted({r for r in rows if rows.count(r) > 1})))
    for name in sorted(all_ops - NOT_INSTRUCTIONS - set(rows)):
        problems.append(f"fsdp.{name} has no row in Ops.def (no CPU kernel, no device lowering)")
    for name in sorted(set(rows) - all_ops):
        problems.append(f"Ops.def row '{name}' names no op of the dialect")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("agree", len(unary_rows), len(binary_rows), len(set(rows)))


main()
