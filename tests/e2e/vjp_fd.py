#!/usr/bin/env python3
"""Every VJP against central finite differences of our own forward pass.

For each case a one-op model is built whose float inputs are parameters
and whose loss is sum(op(inputs) * R) for a fixed random R: an ONNX model
(inputs as initializers) for every op the importer emits, MLIR text for the
fused activations it does not emit yet. fsdp-opt compiles it, fsdp-run
--dump-grads gives the gradients; for a few random coordinates of each
parameter the loss is re-evaluated at w ± h (--weights with a perturbed
safetensors copy, same plan). The runtime computes in float32, so h = 1e-2
and the tolerance is 2e-2 relative to max(|fd|, 0.1 * mean |grad|): a
wrong VJP is wrong by O(1), float32 differences are ~1e-4 here.
"""
import argparse
import json
import os
import subprocess
import bounded  # subprocess.run with a deadline
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from fsdp_trace.lower import UNARY_ROWS  # noqa: E402 (the registry's rows, aten -> fsdp)

H = 1e-2
TOL = 2e-2
rng = np.random.default_rng(0)


def param(name, shape, positive=False):
    a = rng.standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.5
    else:  # keep clear of kinks (abs, relu at 0) by more than h
        a = np.where(a >= 0, a + 0.1, a - 0.1).astype(np.float32)
    return numpy_helper.from_array(a, name)


def const(name, array):
    return helper.make_node("Constant", [], [name], name="/c/" + name,
                            value=numpy_helper.from_array(np.asarray(array), name + "_v"))


def model(nodes, inits, outputs, opset=17):
    """`outputs`: (value name, shape) of the op; the loss weighs them."""
    all_nodes = list(nodes)
    terms = []
    for i, (name, shape) in enumerate(outputs):
        r = rng.standard_normal(shape).astype(np.float32)
        all_nodes.append(const(f"r{i}", r))
        all_nodes.append(helper.make_node("Mul", [name, f"r{i}"], [f"m{i}"], name=f"/loss/Mul{i}"))
        all_nodes.append(helper.make_node("ReduceSum", [f"m{i}"], [f"s{i}"], name=f"/loss/Sum{i}",
                                          keepdims=0))
        terms.append(f"s{i}")
    total = terms[0]
    for i, t in enumerate(terms[1:]):
        all_nodes.append(helper.make_node("Add", [total, t], [f"t{i}"], name=f"/loss/Add{i}"))
        total = f"t{i}"
    all_nodes.append(helper.make_node("Identity", [total], ["loss"], name="/loss/Identity"))
    g = helper.make_graph(all_nodes, "m", [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def unary(op, positive=False, shape=(3, 4)):
    return model([helper.make_node(op, ["x"], ["y"], name="/op")], [param("x", shape, positive)],
                 [("y", shape)])


def binary(op, sa=(3, 4), sb=(4,), positive=False):
    out = tuple(np.broadcast_shapes(sa, sb))
    a, b = param("a", sa, positive), param("b", sb, positive)
    if op in ("Max", "Min"):  # keep a and b apart by more than h (the kink)
        av, bv = numpy_helper.to_array(a), numpy_helper.to_array(b)
        close = np.abs(av - bv) < 0.1
        a = numpy_helper.from_array(np.where(close, av + 0.3, av).astype(np.float32), "a")
    return model([helper.make_node(op, ["a", "b"], ["y"], name="/op")], [a, b], [("y", out)])


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def mlir_unary(op, attrs="", positive=False, unit=False):
    """Ops the importer never emits yet (fused activations): as MLIR text.
    `unit`: inputs inside (-0.9, 0.9) (asin, acos, erfinv)."""
    x = rng.standard_normal((3, 4)).astype(np.float32)
    if positive:
        x = np.abs(x) + 0.5
    if unit:
        x = np.tanh(x).astype(np.float32) * 0.9
    r = rng.standard_normal((3, 4)).astype(np.float32)
    dense = "[" + ", ".join("[" + ", ".join(f"{v:.8e}" for v in row) + "]" for row in r) + "]"
    text = f"""
fsdp.parameter @x : tensor<3x4xf32> {{module_path = ""}}
func.func @forward() -> (tensor<f32> {{fsdp.name = "loss"}}) {{
  %x = fsdp.get_parameter @x : tensor<3x4xf32>
  %y = fsdp.{op} %x {attrs}: tensor<3x4xf32>
  %r = fsdp.constant dense<{dense}> : tensor<3x4xf32>
  %m = fsdp.mul %y, %r : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %s = fsdp.reduce_sum %m {{axes = array<i64: 0, 1>, keepdims = false}} : tensor<3x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}}
"""
    return ("mlir", text, {"x": x})


def cases():
    c = {}
    c["gelu-mlir"] = mlir_unary("gelu")
    c["gelu-tanh-mlir"] = mlir_unary("gelu", '{approximate = "tanh"} ')
    # As torch.onnx.export writes F.gelu(approximate="tanh"): imported as
    # fsdp.gelu (passes/FuseGelu.cpp), differentiated by fsdp.gelu_grad.
    c["gelu-tanh-exported"] = model(
        [const("k", np.float32(0.044715)), const("c", np.float32(np.sqrt(2 / np.pi))),
         const("one", np.float32(1.0)), const("half", np.float32(0.5)),
         helper.make_node("Mul", ["x", "x"], ["x2"], name="/x2"),
         helper.make_node("Mul", ["x", "x2"], ["x3"], name="/x3"),
         helper.make_node("Mul", ["k", "x3"], ["a"], name="/a"),
         helper.make_node("Add", ["x", "a"], ["b"], name="/b"),
         helper.make_node("Mul", ["c", "b"], ["u"], name="/u"),
         helper.make_node("Tanh", ["u"], ["t"], name="/t"),
         helper.make_node("Add", ["one", "t"], ["s"], name="/s"),
         helper.make_node("Mul", ["x", "s"], ["p"], name="/p"),
         helper.make_node("Mul", ["half", "p"], ["y"], name="/op")],
        [param("x", (3, 4))], [("y", (3, 4))])
    # Every row of the unary ops' registry (common/UnaryOps.def), as
    # the dialect's op itself: a new row is tested with no edit here.
    for name in sorted(set(UNARY_ROWS.values())):
        op = name[len("fsdp."):]
        c[f"{op}-mlir"] = mlir_unary(op, positive=op in ("log", "log1p", "sqrt", "rsqrt",
                                                          "reciprocal"),
                                     unit=op in ("asin", "acos", "erfinv"))
    for op in ["Neg", "Exp", "Tanh", "Erf", "Sigmoid", "Abs", "Relu"]:
        c[op] = unary(op)
    for op in ["Log", "Sqrt", "Reciprocal"]:
        c[op] = unary(op, positive=True)
    for op in ["Add", "Sub", "Mul", "Div", "Max", "Min"]:
        c[op] = binary(op, positive=op == "Div")
    c["Pow"] = binary("Pow", (3, 4), (3, 4), positive=True)
    c["MatMul-batched"] = model([helper.make_node("MatMul", ["a", "b"], ["y"], name="/op")],
                                [param("a", (2, 3, 4)), param("b", (4, 5))], [("y", (2, 3, 5))])
    # nn.Linear on a batch of rows: imported as one matmul with a bias
    # (passes/FuseMatmulBias.cpp).
    c["MatMul-batched-bias"] = model(
        [helper.make_node("MatMul", ["a", "w"], ["p"], name="/p"),
         helper.make_node("Add", ["p", "b"], ["y"], name="/op")],
        [param("a", (2, 3, 4)), param("w", (4, 5)), param("b", (5,))], [("y", (2, 3, 5))])
    c["Gemm-transB-bias"] = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="/op",
                                                    transB=1, alpha=0.5, beta=2.0)],
                                  [param("a", (3, 4)), param("b", (5, 4)), param("c", (5,))],
                                  [("y", (3, 5))])
    for op, extra in [("ReduceSum", {}), ("ReduceMean", {"axes": [1]}), ("ReduceMax", {"axes": [0]})]:
        nodes = []
        ins = ["x"]
        if op == "ReduceSum":
            nodes.append(const("axes", np.array([0, 2], np.int64)))
            ins.append("axes")
        nodes.append(helper.make_node(op, ins, ["y"], name="/op", keepdims=1, **extra))
        shape = {"ReduceSum": (1, 3, 1), "ReduceMean": (2, 1, 4), "ReduceMax": (1, 3, 4)}[op]
        c[op] = model(nodes, [param("x", (2, 3, 4))], [("y", shape)])
    c["Softmax"] = model([helper.make_node("Softmax", ["x"], ["y"], name="/op", axis=1)],
                         [param("x", (3, 5))], [("y", (3, 5))])
    c["LogSoftmax"] = model([helper.make_node("LogSoftmax", ["x"], ["y"], name="/op", axis=-1)],
                            [param("x", (3, 5))], [("y", (3, 5))])
    # Convolutions: 2-D with padding, stride and bias; asymmetric pads,
    # dilation and groups; 1-D.
    def conv(x_shape, w_shape, out_shape, bias=True, **attrs):
        inputs = ["x", "w"] + (["b"] if bias else [])
        inits = [param("x", x_shape), param("w", w_shape)]
        if bias:
            inits.append(param("b", (w_shape[0],)))
        return model([helper.make_node("Conv", inputs, ["y"], name="/op", **attrs)], inits,
                     [("y", out_shape)])
    c["Conv-2d-pad-stride-bias"] = conv((2, 3, 6, 5), (4, 3, 3, 3), (2, 4, 3, 3),
                                        pads=[1, 1, 1, 1], strides=[2, 2])
    c["Conv-2d-dilation-groups"] = conv((1, 4, 7, 6), (6, 2, 2, 3), (1, 6, 6, 2), bias=False,
                                        pads=[1, 0, 0, 1], dilations=[2, 2], group=2,
                                        strides=[1, 2])
    c["Conv-1d-same"] = conv((2, 3, 7), (2, 3, 4), (2, 2, 4), auto_pad="SAME_UPPER",
                             strides=[2])
    # ConvTranspose: composed at import (spread by the stride, padded, a
    # stride-1 conv with the kernel flipped and its channels swapped).
    def conv_t(x_shape, w_shape, out_shape, bias=True, **attrs):
        inputs = ["x", "w"] + (["b"] if bias else [])
        inits = [param("x", x_shape), param("w", w_shape)]
        if bias:
            inits.append(param("b", (w_shape[1] * attrs.get("group", 1),)))
        return model([helper.make_node("ConvTranspose", inputs, ["y"], name="/op", **attrs)],
                     inits, [("y", out_shape)])
    c["ConvTranspose-2d-stride-pad-outpad"] = conv_t(
        (2, 3, 3, 4), (3, 2, 3, 3), (2, 2, 6, 8), pads=[1, 1, 1, 1], strides=[2, 2],
        output_padding=[1, 1])
    c["ConvTranspose-1d-groups-dilation"] = conv_t(
        (1, 4, 5), (4, 3, 2), (1, 6, 7), bias=False, group=2, dilations=[2])
    c["PRelu-channel"] = model(
        [helper.make_node("PRelu", ["x", "s"], ["y"], name="/op")],
        [param("x", (2, 3, 4)), param("s", (3, 1))], [("y", (2, 3, 4))])
    # Pools. A max window's winner must not change within x ± h: the inputs
    # are a shuffled ramp, every two values 0.05 (> 2h) apart.
    def pool(op, x_shape, out_shape, **attrs):
        n = int(np.prod(x_shape))
        ramp = (rng.permutation(n) * 0.05 - 0.025 * n).astype(np.float32)
        x = numpy_helper.from_array(ramp.reshape(x_shape), "x")
        return model([helper.make_node(op, ["x"], ["y"], name="/op", **attrs)],
                     [x], [("y", out_shape)])
    c["MaxPool-2d-pads-strides"] = pool("MaxPool", (2, 3, 7, 6), (2, 3, 4, 3), kernel_shape=[3, 3],
                                        strides=[2, 2], pads=[1, 1, 1, 1])
    c["MaxPool-1d-dilation"] = pool("MaxPool", (2, 2, 9), (2, 2, 5), kernel_shape=[3],
                                    dilations=[2])
    c["AveragePool-ceil-exclude-pad"] = pool("AveragePool", (1, 2, 5, 5), (1, 2, 3, 3),
                                             kernel_shape=[2, 2], strides=[2, 2],
                                             pads=[1, 1, 1, 1], ceil_mode=1)
    c["AveragePool-include-pad"] = pool("AveragePool", (1, 2, 5, 4), (1, 2, 5, 4),
                                        kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                        count_include_pad=1)
    c["GlobalAveragePool"] = pool("GlobalAveragePool", (2, 3, 4, 5), (2, 3, 1, 1))
    # Batch norm in training mode: the batch's statistics (the running
    # statistics, initializers named running_*, are buffers: no gradient).
    bn_stats = [numpy_helper.from_array(np.zeros(3, np.float32), "running_mean"),
                numpy_helper.from_array(np.ones(3, np.float32), "running_var")]
    c["BatchNormalization-training"] = model(
        [helper.make_node("BatchNormalization", ["x", "g", "b", "running_mean", "running_var"],
                          ["y", "rm", "rv"], name="/op", training_mode=1, momentum=0.9)],
        [param("x", (4, 3, 2, 3)), param("g", (3,), positive=True), param("b", (3,))] + bn_stats,
        [("y", (4, 3, 2, 3))])
    c["LayerNormalization"] = model(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="/op", axis=-1)],
        [param("x", (3, 6)), param("g", (6,)), param("b", (6,))], [("y", (3, 6))])
    c["LayerNormalization-nobias-2axes"] = model(
        [helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="/op", axis=1)],
        [param("x", (2, 3, 4)), param("g", (3, 4))], [("y", (2, 3, 4))])
    # Llama's RMSNorm as exported (Pow/ReduceMean/Add/Sqrt/Div/Mul): the
    # importer fuses it into fsdp.rms_norm, whose gradient is rms_norm_grad.
    c["RMSNorm-fused"] = model(
        [const("two", np.float32(2.0)), const("eps", np.float32(1e-6)),
         helper.make_node("Pow", ["x", "two"], ["sq"], name="/pow"),
         helper.make_node("ReduceMean", ["sq"], ["m"], name="/mean", axes=[-1], keepdims=1),
         helper.make_node("Add", ["m", "eps"], ["a"], name="/add"),
         helper.make_node("Sqrt", ["a"], ["s"], name="/sqrt"),
         helper.make_node("Div", ["x", "s"], ["n"], name="/div"),
         helper.make_node("Mul", ["n", "g"], ["y"], name="/op")],
        [param("x", (2, 3, 6)), param("g", (6,))], [("y", (2, 3, 6))])
    c["Gather-embedding"] = model(
        [const("ids", np.array([[1, 3, 1], [0, 2, 3]], np.int64)),
         helper.make_node("Gather", ["w", "ids"], ["y"], name="/op")],
        [param("w", (4, 5))], [("y", (2, 3, 5))])
    c["Transpose"] = model([helper.make_node("Transpose", ["x"], ["y"], name="/op", perm=[2, 0, 1])],
                           [param("x", (2, 3, 4))], [("y", (4, 2, 3))])
    c["Slice-strided"] = model(
        [const("st", np.array([1, 0], np.int64)), const("en", np.array([4, 5], np.int64)),
         const("ax", np.array([0, 1], np.int64)), const("sp", np.array([2, 2], np.int64)),
         helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="/op")],
        [param("x", (5, 6))], [("y", (2, 3))])
    c["Concat"] = model([helper.make_node("Concat", ["a", "b"], ["y"], name="/op", axis=1)],
                        [param("a", (2, 3)), param("b", (2, 2))], [("y", (2, 5))])
    c["Split"] = model([const("sz", np.array([1, 3], np.int64)),
                        helper.make_node("Split", ["x", "sz"], ["y0", "y1"], name="/op", axis=1)],
                       [param("x", (2, 4))], [("y0", (2, 1)), ("y1", (2, 3))])
    c["Expand"] = model([const("sh", np.array([3, 4], np.int64)),
                         helper.make_node("Expand", ["x", "sh"], ["y"], name="/op")],
                        [param("x", (1, 4))], [("y", (3, 4))])
    c["Where"] = model([const("cond", np.array([[True, False, True, False]] * 3)),
                        helper.make_node("Where", ["cond", "a", "b"], ["y"], name="/op")],
                       [param("a", (3, 4)), param("b", (4,))], [("y", (3, 4))])
    c["Trilu"] = model([helper.make_node("Trilu", ["x"], ["y"], name="/op", upper=0)],
                       [param("x", (4, 4))], [("y", (4, 4))])
    c["SoftmaxCrossEntropyLoss"] = model(
        [const("t", np.array([1, 4, 0, 2], np.int64)),
         helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], name="/op", ignore_index=0)],
        [param("x", (4, 5))], [("y", ())])
    # Class weights take no gradient (as in PyTorch): a constant here.
    c["NegativeLogLikelihoodLoss-weighted"] = model(
        [const("t", np.array([1, 4, 0, 2], np.int64)),
         const("w", (np.abs(rng.standard_normal(5)) + 0.5).astype(np.float32)),
         helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], name="/op")],
        [param("x", (4, 5))], [("y", ())])
    # Causal attention (fused at import): q·kᵀ·s → where(tril) → softmax → ·v.
    T, D = 4, 3
    c["attention-causal"] = model(
        [helper.make_node("Transpose", ["k"], ["kt"], name="/kt", perm=[0, 2, 1]),
         helper.make_node("MatMul", ["q", "kt"], ["s"], name="/qk"),
         const("scale", np.float32(0.5)),
         helper.make_node("Mul", ["s", "scale"], ["ss"], name="/scale"),
         const("ones", np.ones((T, T), np.float32)),
         helper.make_node("Trilu", ["ones"], ["tril"], name="/tril", upper=0),
         const("zero", np.float32(0)),
         helper.make_node("Equal", ["tril", "zero"], ["hide"], name="/eq"),
         const("ninf", np.float32(-np.inf)),
         helper.make_node("Where", ["hide", "ninf", "ss"], ["m"], name="/mask"),
         helper.make_node("Softmax", ["m"], ["p"], name="/softmax", axis=-1),
         helper.make_node("MatMul", ["p", "v"], ["y"], name="/pv")],
        [param("q", (2, T, D)), param("k", (2, T, D)), param("v", (2, T, D))], [("y", (2, T, D))])
    # A learned additive bias (Swin's relative-position table: a lookup of
    # a trained parameter), fused into the attention as its mask: the
    # table's gradient is the scores' (it had none: trained as a buffer).
    rel = np.array([[i - j + T - 1 for j in range(T)] for i in range(T)], np.int64)
    c["attention-learned-bias"] = model(
        [helper.make_node("Transpose", ["k"], ["kt"], name="/kt", perm=[0, 2, 1]),
         helper.make_node("MatMul", ["q", "kt"], ["s"], name="/qk"),
         const("scale", np.float32(0.5)),
         helper.make_node("Mul", ["s", "scale"], ["ss"], name="/scale"),
         const("rel", rel),
         helper.make_node("Gather", ["table", "rel"], ["bias"], name="/bias"),
         helper.make_node("Add", ["ss", "bias"], ["m"], name="/mask"),
         helper.make_node("Softmax", ["m"], ["p"], name="/softmax", axis=-1),
         helper.make_node("MatMul", ["p", "v"], ["y"], name="/pv")],
        [param("q", (2, T, D)), param("k", (2, T, D)), param("v", (2, T, D)),
         param("table", (2 * T - 1,))], [("y", (2, T, D))])
    return c


def loss_at(tools, plan, weights_path, tmp):
    log = os.path.join(tmp, "fd.jsonl")
    bounded.run([tools[1], plan, "--weights", weights_path, "--steps", "1", "--log", log,
                    "--quiet"], check=True)
    return json.loads(open(log).readline())["loss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--coords", type=int, default=3)
    ap.add_argument("cases", nargs="*", help="only cases whose name starts so")
    a = ap.parse_args()
    tools = (a.fsdp_opt, a.fsdp_run)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from parity import read_safetensors
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in cases().items():
            if a.cases and not any(name.startswith(c) for c in a.cases):
                continue
            if isinstance(m, tuple):  # (kind, MLIR text, initial values)
                _, text, values = m
                path = os.path.join(tmp, "m.mlir")
                open(path, "w").write(text)
                weights = {k: v.copy() for k, v in values.items()}
            else:
                path = os.path.join(tmp, "m.onnx")
                onnx.save(m, path)
                weights = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
            base = os.path.join(tmp, "base.safetensors")
            write_safetensors(base, weights)
            plan = os.path.join(tmp, "m.plan")
            r = bounded.run([tools[0], path, "-o", plan], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: fsdp-opt: {r.stderr.strip()}")
                failed += 1
                continue
            grads_path = os.path.join(tmp, "g.safetensors")
            bounded.run([tools[1], plan, "--weights", base, "--steps", "1", "--dump-grads",
                            grads_path, "--quiet"], check=True)
            grads = read_safetensors(grads_path)
            worst, problems = 0.0, []
            for pname, w in weights.items():
                if pname.startswith("running_"):  # buffers: no gradient
                    continue
                g = grads.get(pname)
                if g is None:
                    problems.append(f"no gradient for {pname}")
                    continue
                scale = 0.1 * float(np.mean(np.abs(g))) + 1e-6
                for flat in rng.choice(w.size, size=min(a.coords, w.size), replace=False):
                    vals = []
                    for sign in (1, -1):
                        pert = w.copy().reshape(-1)
                        pert[flat] += sign * H
                        wp = os.path.join(tmp, "w.safetensors")
                        write_safetensors(wp, {**weights, pname: pert.reshape(w.shape)})
                        vals.append(loss_at(tools, plan, wp, tmp))
                    fd = (vals[0] - vals[1]) / (2 * H)
                    got = float(g.reshape(-1)[flat])
                    err = abs(got - fd) / max(abs(fd), scale)
                    worst = max(worst, err)
                    if err > TOL:
                        problems.append(f"{pname}[{flat}]: vjp {got:.6g}, fd {fd:.6g}")
            ok = not problems
            passed += ok
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name}: worst relative error {worst:.1e}")
            for p in problems[:4]:
                print("   ", p)
    print(f"vjp-finite-differences: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
