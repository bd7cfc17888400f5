#!/usr/bin/env python3
"""Builds the calibration's reference models (references.txt beside this
script) into OUTDIR: each model exported once with examples/gen_model.py
(a loss in the graph, a dynamic batch), and OUTDIR/references.txt, the list
fsdp-opt reads (`FILE.onnx FLAG...` a line).

Without PyTorch (Debian's python3-torch) it writes an empty list and says
so: fsdp-opt then prices --device=cpu on the raw calibration.

    calibration/make_references.py OUTDIR
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def entries():
    """(name, gen_model arguments or None, fsdp-opt flags) per line."""
    out = []
    with open(os.path.join(HERE, "references.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, gen, flags = (part.strip() for part in line.split("|"))
            out.append((name, gen.split() or None, flags.split()))
    return out


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    try:
        import torch  # noqa: F401
    except ImportError:
        print("make_references: no PyTorch: no reference models (--device=cpu "
              "is priced on the raw calibration)", file=sys.stderr)
    else:
        for name, gen, flags in entries():
            onnx = name + ".onnx"
            if gen:
                subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gen_model.py")]
                               + gen[:1] + ["--loss", "--dynamic-batch"] + gen[1:]
                               + ["-o", os.path.join(out, onnx)],
                               check=True, stdout=subprocess.DEVNULL)
            lines.append(" ".join([onnx] + flags))
    tmp = os.path.join(out, "references.txt.tmp")
    with open(tmp, "w") as f:
        f.write("# fsdp-opt's calibration references (calibration/make_references.py)\n")
        f.write("".join(l + "\n" for l in lines))
    os.replace(tmp, os.path.join(out, "references.txt"))


if __name__ == "__main__":
    main()
