#!/usr/bin/env bash
# The demo: export a small GPT-2 from PyTorch with a dynamic batch axis,
# import it with fsdp-opt at batch size 4, show what was found and write the
# imported module next to it.
set -euo pipefail
build=${1:-build}
out="$build/demo"
mkdir -p "$out"
echo "== exporting a 4-layer GPT-2 (tied embeddings, dynamic batch) with torch.onnx.export"
/usr/bin/python3 examples/gen_model.py gpt2 -o "$out/gpt2.onnx" --dynamic-batch \
  --layers 4 --dim 64 --heads 4 --seq 32 --vocab 256
echo "== fsdp-opt $out/gpt2.onnx --batch-size=4 --summary"
"$build/tools/fsdp-opt" "$out/gpt2.onnx" --batch-size=4 --summary
"$build/tools/fsdp-opt" "$out/gpt2.onnx" --batch-size=4 -o "$out/gpt2.mlir"
echo "== imported module written to $out/gpt2.mlir ($(wc -l < "$out/gpt2.mlir") lines)"
