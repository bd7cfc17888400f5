#!/usr/bin/env python3
"""Exports every model the generators make, for opsets 14-17, with and
without a dynamic batch axis (plus untied GPT-2, losses and external data),
imports each with fsdp-opt and checks the imported function's input and
output shapes against what PyTorch computed. Attention must fuse in every
transformer. One process, so torch is imported once.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile


def load_generator(path):
    spec = importlib.util.spec_from_file_location("gen_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tensor(shape, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--generator", required=True)
    a = ap.parse_args()
    gen = load_generator(a.generator)

    cases = []
    for model in ("gpt2", "llama", "bert", "mlp"):
        for opset in (14, 15, 16, 17):
            for dynamic in (False, True):
                cases.append([model, "--opset", str(opset)] +
                             (["--dynamic-batch"] if dynamic else []))
    cases += [["gpt2", "--untied"], ["gpt2", "--untied", "--dynamic-batch"],
              ["gpt2", "--loss"], ["llama", "--loss"], ["bert", "--loss"],
              ["mlp", "--loss", "mse"], ["mlp", "--loss", "bce"],
              ["mlp", "--loss", "nll"], ["llama", "--external-data"],
              ["llama", "--kv-heads", "4"], ["llama", "--kv-heads", "1"]]

    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            name = " ".join(case)
            path = os.path.join(tmp, f"m{i}.onnx")
            dynamic = "--dynamic-batch" in case
            batch = 3 if dynamic else 2
            try:
                shapes = gen.export(case + ["-o", path, "--batch", "2"])
            except Exception as e:  # an export failure is a generator bug
                print(f"FAIL {name}: export raised {e!r}")
                failed += 1
                continue
            cmd = [a.fsdp_opt, path] + ([f"--batch-size={batch}"] if dynamic else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            problems = []
            if r.returncode != 0:
                problems.append(f"exit {r.returncode}: {r.stderr.strip()}")
            else:
                sig = re.search(r"func\.func @forward\((.*)\) -> \((.*)\) \{", r.stdout)
                out_shape = list(shapes["output"])
                if out_shape and dynamic:
                    out_shape[0] = batch
                want_out = tensor(out_shape, "f32")
                if not sig or want_out not in sig.group(2):
                    problems.append(f"output type: want {want_out} in {sig and sig.group(2)}")
                for n, s in shapes["inputs"].items():
                    s = [batch] + s[1:] if dynamic else s
                    if not sig or f'fsdp.name = "{n}"' not in sig.group(1) or \
                            tensor(s, "") [:-1] not in sig.group(1):
                        problems.append(f"input {n}: want {s}")
                if case[0] != "mlp" and "fsdp.attention" not in r.stdout:
                    problems.append("attention did not fuse")
                if case[0] != "mlp" and "fsdp.softmax" in r.stdout:
                    problems.append("a softmax is left over")
            if problems:
                failed += 1
                print(f"FAIL {name}: " + "; ".join(problems))
            else:
                passed += 1
                print(f"PASS {name}")
    print(f"import-matrix: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
