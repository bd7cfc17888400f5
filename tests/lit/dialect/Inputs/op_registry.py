"""The registry of elementwise unary ops (runtime/plan/UnaryOps.def)
against the dialect (dialect/FsdpTensorOps.td): every Fsdp_UnaryOp has a
row with its class and mnemonic, and every row names such an op. Prints
"agree N" or each disagreement (and exits 1).

    op_registry.py ROOT
"""
import re
import sys

# Unary ops of the dialect that are not float elementwise math: their
# kernels are the logic ops'.
NOT_IN_REGISTRY = {"Not"}


def main():
    root = sys.argv[1]
    td = open(f"{root}/dialect/FsdpTensorOps.td").read()
    ops = dict(re.findall(r'def Fsdp_(\w+)Op\s*:\s*Fsdp_UnaryOp<"(\w+)"', td))
    rows = dict(re.findall(r'^FSDP_UNARY\((\w+), "(\w+)"',
                           open(f"{root}/runtime/plan/UnaryOps.def").read(), re.M))
    problems = []
    for cls, name in sorted(ops.items()):
        if cls in NOT_IN_REGISTRY:
            continue
        if cls not in rows:
            problems.append(f"fsdp.{name} (Fsdp_{cls}Op) has no row in UnaryOps.def")
        elif rows[cls] != name:
            problems.append(f"row {cls} names '{rows[cls]}', the dialect's op is '{name}'")
    for cls, name in sorted(rows.items()):
        if cls not in ops:
            problems.append(f"row {cls} ('{name}') names no Fsdp_UnaryOp of the dialect")
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("agree", len(rows))


main()
