#!/usr/bin/env python3
"""Imports libonnx-testdata's node tests for the ops fsdp-opt supports and
checks every inferred output type (shape and element type) against the
test's reference output.

A test is *imported* when fsdp-opt exits 0 and its output types match;
*rejected* when fsdp-opt exits 1 with a diagnostic because the test feeds,
as a runtime graph input, a value the importer needs at import time (a
Reshape shape, Slice bounds, ...: fsdp plans static shapes), or uses a form
the importer reports as unsupported; *failed* on a type mismatch, a crash or
any other exit status. The suite fails on any failure, or when fewer tests
import than the floor below (so losing coverage is noticed).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

import onnx
from onnx import TensorProto

DATA = "/usr/share/libonnx-testdata/data/node"
MIN_IMPORTED = 150

ELEM = {TensorProto.FLOAT: "f32", TensorProto.DOUBLE: "f64",
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


def reference_type(pb):
    t = TensorProto()
    with open(pb, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type not in ELEM:
        return None
    return "tensor<" + "".join(f"{d}x" for d in t.dims) + ELEM[t.data_type] + ">"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    supported = set(subprocess.run([a.fsdp_opt, "--list-onnx-ops"], check=True,
                                   capture_output=True, text=True).stdout.split())
    imported, rejected, failed = [], [], []
    for model_path in sorted(glob.glob(os.path.join(DATA, "*", "model.onnx"))):
        name = os.path.basename(os.path.dirname(model_path))
        m = onnx.load(model_path)
        opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
        if not (7 <= m.ir_version <= 10 and 13 <= opset <= 21):
            continue
        if any(n.op_type not in supported or n.domain not in ("", "ai.onnx")
               for n in m.graph.node):
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
    print(f"onnx node tests: {len(imported)} imported with matching types, "
          f"{len(rejected)} rejected with a diagnostic, {len(failed)} failed")
    if len(imported) < MIN_IMPORTED:
        print(f"FAIL: fewer than {MIN_IMPORTED} tests imported")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
