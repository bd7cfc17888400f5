#!/usr/bin/env python3
"""Imports libonnx-testdata's node tests for the ops fsdp-opt supports and
checks every inferred output type (shape and element type) against the
test's reference output.

With --fold, each test's inputs are given as Constant nodes instead: the
importer then folds ops it can evaluate at import time (shape subgraphs,
masks), and the folded constant must equal the reference output values
(float32 rounding: relative 1e-5). Tests whose result is not folded (a
matmul, a softmax: they stay ops) are not counted.

A test is *imported* when fsdp-opt exits 0 and its output types match;
*rejected* when fsdp-opt exits 1 with a diagnostic because the test feeds,
as a runtime graph input, a value the importer needs at import time (a
Reshape shape, Slice bounds, ...: fsdp plans static shapes), or uses a form
the importer reports as unsupported; *failed* on a type mismatch, a crash or
any other exit status. The suite fails on any failure, or when fewer tests
import than the floor below (so losing coverage is noticed).
"""
import argparse
import atexit
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

DATA = "/usr/share/libonnx-testdata/data/node"
MIN_IMPORTED = 150
MIN_FOLDED = 150

# Function-expanded window tests whose reference outputs (from onnx 1.12's
# reference of the fused op) disagree with their own expanded graphs by
# ~1e-4: evaluating the graph in float32 with numpy gives the values we fold
# (e.g. hann, N=10, n=8: 0.5 - 0.5*cos(8*2*pi/10) = 0.345491, reference 0.345562).
KNOWN_BAD_REFERENCE = {
    "test_blackmanwindow_expanded", "test_blackmanwindow_symmetric_expanded",
    "test_hammingwindow_expanded", "test_hammingwindow_symmetric_expanded",
    "test_hannwindow_expanded", "test_hannwindow_symmetric_expanded",
    # onnx 1.12's reference truncates float32 -> bfloat16 (0.81910545 ->
    # 0.81640625); we round to nearest even as PyTorch does (-> 0.8203125).
    "test_cast_FLOAT_to_BFLOAT16"}

# A graph's float64 values are computed in float32 (no backend computes
# float64: frontend/DemoteFloat64.cpp), so a double reference is an f32.
ELEM = {TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f32",
        TensorProto.FLOAT16: "f16", TensorProto.BFLOAT16: "bf16",
        TensorProto.INT64: "i64", TensorProto.INT32: "i32",
        TensorProto.INT16: "i16", TensorProto.INT8: "i8",
        TensorProto.UINT8: "ui8", TensorProto.BOOL: "i1"}

# Diagnostics that mean "this test needs a value at import time that it
# only provides at run time" or "a documented unsupported form".
ACCEPTED_REJECTIONS = re.compile(
    r"must be known at import time|is only supported on values known at "
    r"import time|unsupported data type|unsupported element type|"
    r"is not supported|are not supported|is read but|unsupported target type|"
    r"only tensor, float and int constants|is not a tensor")


# Ops whose schema has not changed from this opset through opset 17: a
# test written at an older opset (and IR version) is the same test at 17,
# so it is promoted and imported rather than skipped (the Conv tests are
# opset 11, IR 6; the pools 11 and 12).
UNCHANGED_SINCE = {"Conv": 11, "MaxPool": 12, "AveragePool": 11, "GlobalAveragePool": 1,
                   "GlobalMaxPool": 1, "Softplus": 1, "HardSwish": 14,
                   "ConvTranspose": 11}


def promoted(m):
    """The model at opset 17 and IR 8 when every node's op is unchanged
    since the model's opset (else None)."""
    opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
    if not m.graph.node or any(UNCHANGED_SINCE.get(n.op_type, 99) > opset for n in m.graph.node):
        return None
    del m.opset_import[:]
    m.opset_import.append(onnx.helper.make_opsetid("", 17))
    m.ir_version = 8
    return m


def reference_type(pb):
    t = TensorProto()
    with open(pb, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type not in ELEM:
        return None
    return "tensor<" + "".join(f"{d}x" for d in t.dims) + ELEM[t.data_type] + ">"


def read_tensor(pb):
    t = TensorProto()
    with open(pb, "rb") as f:
        t.ParseFromString(f.read())
    return t


def with_constant_inputs(m, test_dir):
    """The model with its graph inputs replaced by Constant nodes."""
    inputs = sorted(glob.glob(os.path.join(test_dir, "test_data_set_0", "input_*.pb")),
                    key=lambda p: int(re.search(r"input_(\d+)", p).group(1)))
    if len(inputs) != len(m.graph.input):
        return None
    consts = []
    for vi, pb in zip(m.graph.input, inputs):
        t = read_tensor(pb)
        t.name = vi.name + "_value"
        consts.append(onnx.helper.make_node("Constant", [], [vi.name],
                                            name="/const/" + vi.name, value=t))
    nodes = consts + list(m.graph.node)
    del m.graph.input[:]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def hex_float(bits, elem):
    """MLIR prints non-finite floats as their bit pattern."""
    if elem == "bf16":
        return float(np.array([bits << 16], np.uint32).view(np.float32)[0])
    if elem == "f16":
        return float(np.array([bits], np.uint16).view(np.float16)[0])
    if elem == "f64":
        return float(np.array([bits], np.uint64).view(np.float64)[0])
    return float(np.array([bits], np.uint32).view(np.float32)[0])


def dense_values(text, elem):
    """Numbers of an MLIR dense<...> literal of element type `elem`."""
    vals = []
    for tok in re.findall(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)|true|false", text):
        if tok == "true":
            vals.append(1.0)
        elif tok == "false":
            vals.append(0.0)
        elif tok.startswith("0x"):
            vals.append(hex_float(int(tok, 16), elem))
        else:
            vals.append(float(tok))
    return np.array(vals, np.float64)


def fold_check(a, model_path, name):
    """None when the result is not folded, else (ok, message)."""
    if name in KNOWN_BAD_REFERENCE:
        return None
    test_dir = os.path.dirname(model_path)
    m = with_constant_inputs(onnx.load(model_path), test_dir)
    outputs = sorted(glob.glob(os.path.join(test_dir, "test_data_set_0", "output_*.pb")))
    if m is None or len(outputs) != 1:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        onnx.save(m, path)
        r = subprocess.run([a.fsdp_opt, path,
                            "--mlir-print-elementsattrs-with-hex-if-larger=-1"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return None
    ret = re.search(r"return (%\w+)", r.stdout)
    const = ret and re.search(re.escape(ret.group(1)) +
                              r" = fsdp\.constant dense<(.*)> : tensor<[0-9x]*(\w+)>", r.stdout)
    if not const:
        return None
    ref = read_tensor(outputs[0])
    want = numpy_helper.to_array(ref)
    if const.group(2) == "bf16":  # the reference holds raw bf16 bit patterns
        want = (want.astype(np.uint32) << 16).view(np.float32)
    want = want.astype(np.float64).ravel()
    got = dense_values(const.group(1), const.group(2))
    if got.size == 1 and want.size > 1:
        got = np.full(want.shape, got[0])
    if got.shape != want.shape:
        return False, f"{got.size} values folded, {want.size} expected"
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        bad = int(np.nanargmax(np.where(np.isclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True), 0, np.abs(got - want) + 1)))
        return False, f"value {bad}: folded {got[bad]}, expected {want[bad]}"
    return True, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fold", action="store_true",
                    help="check constant folding against reference values")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    supported = set(subprocess.run([a.fsdp_opt, "--list-onnx-ops"], check=True,
                                   capture_output=True, text=True).stdout.split())
    imported, rejected, failed = [], [], []
    promoted_dir = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, promoted_dir, True)
    for model_path in sorted(glob.glob(os.path.join(DATA, "*", "model.onnx"))):
        name = os.path.basename(os.path.dirname(model_path))
        m = onnx.load(model_path)
        opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
        if not (7 <= m.ir_version <= 10 and 13 <= opset <= 21):
            m = promoted(m)
            if m is None:
                continue
            # Beside a link to the test's data, where the checks look.
            here = os.path.join(promoted_dir, name)
            os.mkdir(here)
            os.symlink(os.path.join(os.path.dirname(model_path), "test_data_set_0"),
                       os.path.join(here, "test_data_set_0"))
            model_path = os.path.join(here, "model.onnx")
            onnx.save(m, model_path)
        if any(n.op_type not in supported or n.domain not in ("", "ai.onnx")
               for n in m.graph.node):
            continue
        if a.fold:
            res = fold_check(a, model_path, name)
            if res is None:
                continue
            if res[0]:
                imported.append(name)
            else:
                failed.append((name, res[1]))
            continue
        outputs = sorted(glob.glob(os.path.join(os.path.dirname(model_path),
                                                "test_data_set_0", "output_*.pb")))
        want = [reference_type(p) for p in outputs]
        r = subprocess.run([a.fsdp_opt, model_path], capture_output=True, text=True)
        if r.returncode == 1 and ACCEPTED_REJECTIONS.search(r.stderr):
            rejected.append((name, r.stderr.strip().splitlines()[0]))
            continue
        if r.returncode != 0:
            failed.append((name, f"exit {r.returncode}: {r.stderr.strip()[:300]}"))
            continue
        sig = re.search(r"func\.func @forward\(.*\) -> \((.*)\) \{", r.stdout)
        got = re.findall(r"tensor<[^>]*>", sig.group(1)) if sig else []
        if [w for w in want if w] != [g for g, w in zip(got, want) if w] or \
                len(got) != len(want):
            failed.append((name, f"types {got} != reference {want}"))
            continue
        imported.append(name)
    for name, why in rejected if a.verbose else []:
        print(f"REJECTED {name}: {why}")
    for name, why in failed:
        print(f"FAIL {name}: {why}")
    if a.fold:
        print(f"onnx node tests, folded: {len(imported)} passed, {len(failed)} failed")
        floor = MIN_FOLDED
    else:
        print(f"onnx node tests: {len(imported)} imported with matching types, "
              f"{len(rejected)} rejected with a diagnostic, {len(failed)} failed")
        floor = MIN_IMPORTED
    if len(imported) < floor:
        print(f"FAIL: fewer than {floor} tests passed")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
