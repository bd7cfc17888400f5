#!/usr/bin/env python3
"""Writes a small ONNX model with one specific defect, for the importer's
bad-input tests:  make_bad_model.py KIND -o model.onnx

The base model is y = Relu(x @ W) with x: [batch, 4] and W: [4, 3].
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def base(opset=17, batch=2):
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "fc.weight")
    nodes = [helper.make_node("MatMul", ["x", "fc.weight"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["y"], name="/act/Relu")]
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8)


def external(m, out, location, offset=0, length=48, make_file=True, symlink=False):
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    d = os.path.dirname(os.path.abspath(out))
    if make_file:
        target = os.path.join(d, "weights.bin")
        with open(target, "wb") as f:
            f.write(b"\0" * 48)
        if symlink:
            link = os.path.join(d, location)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(target, link)
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    k, out = a.kind, a.output
    m = base()
    raw = None
    if k == "valid":
        pass
    elif k == "scoped-name":
        # Exporters name some initializers "onnx::Op_N": the module path then
        # comes from the scope of the node that reads it.
        m.graph.initializer[0].name = "onnx::MatMul_7"
        m.graph.node[0].input[1] = "onnx::MatMul_7"
        m.graph.node[0].name = "/layers.0/mlp/fc/MatMul"
    elif k == "dropout":
        m.graph.node[1].input[0] = "d"
        m.graph.node.insert(1, helper.make_node("Dropout", ["h"], ["d"], name="/drop/Dropout"))
    elif k == "dropout-training":
        m.graph.node[1].input[0] = "d"
        m.graph.node.insert(1, helper.make_node(
            "Dropout", ["h", "", "train"], ["d"], name="/drop/Dropout"))
        m.graph.initializer.append(numpy_helper.from_array(np.array(True), "train"))
    elif k == "int64-fold":
        # Not a defect: int64 constants past 2^53, which the importer folds
        # (in double, 2^60 + 3 - 2^60 would be 0): y = relu(x @ W) * cast(
        # (2^60 + 3) + (-2^60)) * cast((2^60 + 5) mod 7).
        for name, v in (("big", 2**60 + 3), ("minus", -2**60), ("big5", 2**60 + 5),
                        ("seven", 7)):
            m.graph.initializer.append(numpy_helper.from_array(np.array(v, np.int64), name))
        m.graph.node[1].output[0] = "r"
        m.graph.node.extend([
            helper.make_node("Add", ["big", "minus"], ["s"], name="/fold/Add"),
            helper.make_node("Mod", ["big5", "seven"], ["md"], name="/fold/Mod"),
            helper.make_node("Mul", ["s", "md"], ["sm"], name="/fold/Mul"),
            helper.make_node("Cast", ["sm"], ["sf"], name="/fold/Cast", to=TensorProto.FLOAT),
            helper.make_node("Mul", ["r", "sf"], ["y"], name="/fold/Scale")])
    elif k == "truncated":
        raw = base().SerializeToString()
        raw = raw[: len(raw) // 2]
    elif k == "garbage":
        raw = bytes(range(7, 250, 3)) * 4
    elif k == "unknown-domain":
        m.graph.node[1].domain = "com.example"
    elif k == "bad-opset":
        m = base(opset=9)
    elif k == "ir-version":
        m.ir_version = 3
    elif k == "missing-output":
        m.graph.output[0].name = "nope"
    elif k == "cycle":
        m.graph.node[0].input[0] = "y"
        m.graph.input.pop()
    elif k == "duplicate-name":
        m.graph.node.append(helper.make_node("Relu", ["h"], ["y"], name="/act2/Relu"))
    elif k == "undefined-input":
        m.graph.node[1].input[0] = "ghost"
    elif k == "raw-data-length":
        w = m.graph.initializer[0]
        w.raw_data = w.raw_data[:-4]
    elif k == "negative-dim":
        m.graph.initializer[0].dims[0] = -4
    elif k == "overflow-dim":
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1 << 40
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1 << 40
    elif k == "unsupported":
        m.graph.node.append(helper.make_node("Loop", ["y"], ["z"], name="/loop/Loop"))
        m.graph.node.append(helper.make_node("Foo", ["z"], ["w"], name="/foo/Foo"))
    elif k == "dynamic-batch":
        m = base(batch="batch")
    elif k == "shape-mismatch":
        m.graph.initializer[0].CopyFrom(
            numpy_helper.from_array(np.ones((5, 3), np.float32), "fc.weight"))
    elif k == "external-ok":
        m = external(m, out, "weights.bin")
    elif k == "external-absolute":
        m = external(m, out, "/etc/passwd")
    elif k == "external-dotdot":
        m = external(m, out, "../weights.bin")
    elif k == "external-symlink":
        m = external(m, out, "link.bin", symlink=True)
    elif k == "external-range":
        m = external(m, out, "weights.bin", offset=16)
    elif k == "external-missing":
        m = external(m, out, "absent.bin", make_file=False)
    else:
        raise SystemExit("unknown kind " + k)
    with open(out, "wb") as f:
        f.write(raw if raw is not None else m.SerializeToString())


if __name__ == "__main__":
    main()
