#!/usr/bin/env bash
# The demo: export a small GPT-2 from PyTorch, import it (what fsdp-opt
# found), compile it into a training plan and train it on the CPU.
set -euo pipefail
build=${1:-build}
out="$build/demo"
mkdir -p "$out"
model="--layers 4 --dim 64 --heads 4 --seq 32 --vocab 256"
echo "== exporting a 4-layer GPT-2 (tied embeddings, loss in the graph) with torch.onnx.export"
/usr/bin/python3 examples/gen_model.py gpt2 -o "$out/gpt2.onnx" --dynamic-batch --loss $model
echo "== fsdp-opt $out/gpt2.onnx --batch-size=8 --summary"
"$build/tools/fsdp-opt" "$out/gpt2.onnx" --batch-size=8 --summary
echo "== fsdp-opt $out/gpt2.onnx --batch-size=8 --lr=3e-3 -o $out/gpt2.plan"
echo "   (--device=cpu, the default, is this machine: the first compile measures it"
echo "   and fits it to reference runs, once, and caches it in ~/.cache/fsdp)"
"$build/tools/fsdp-opt" "$out/gpt2.onnx" --batch-size=8 --lr=3e-3 -o "$out/gpt2.plan"
echo "   plan: $(grep -c '"op"' "$out/gpt2.plan") instructions," \
     "arena $(grep -m1 '"arena_bytes"' "$out/gpt2.plan" | tr -dc 0-9) bytes"
/usr/bin/python3 examples/make_dataset.py "$out/count.npz" --rows 64 --seq 32 --vocab 256
echo "== fsdp-run $out/gpt2.plan --data $out/count.npz --steps 40 (next token = token + 1)"
"$build/tools/fsdp-run" "$out/gpt2.plan" --data "$out/count.npz" --steps 40 \
  --log "$out/train.jsonl" --trace "$out/measured-1.json"
echo "== step log: $out/train.jsonl"
echo "== fsdp-inspect: one rank's plan predicted against its measured steps"
"$build/tools/fsdp-inspect" "$out/gpt2.plan" --compare "$out/measured-1.json" --ranks 1 |
  grep -E "^(predicted on|step time|measured steps|peak memory)"
echo "== FSDP: fsdp-opt --world-size=2 --strategy=full-shard --units (transformer wrap policy)"
"$build/tools/fsdp-opt" "$out/gpt2.onnx" --batch-size=4 --lr=3e-3 --world-size=2 \
  --strategy=full-shard --units -o "$out/gpt2-ws2.plan" 2>/dev/null
echo "== mpirun -np 2 fsdp-run $out/gpt2-ws2.plan: each rank stores and loads half of every unit"
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$build/tools/fsdp-run" "$out/gpt2-ws2.plan" --data "$out/count.npz" --steps 20 \
  --weights "$out/gpt2.onnx" --log "$out/train-ws2.jsonl" \
  --trace "$out/measured.json" | cat
echo "== fsdp-inspect: the plan's prediction against the measured median step"
"$build/tools/fsdp-inspect" "$out/gpt2-ws2.plan" --trace "$out/predicted.json" \
  --html "$out/plan.html" --compare "$out/measured.json" --ranks 2 | sed -n '/== memory/,/== schedule/p;/== predicted against/,$p'
echo "== traces (open in ui.perfetto.dev): $out/predicted.json $out/measured.json"
echo "== timeline and memory page: $out/plan.html"
echo "== from PyTorch without ONNX: the same GPT-2 module traced (python3 -m fsdp_trace),"
echo "   a unit per GPT2Block by class, 2 ranks"
PYTHONPATH=python /usr/bin/python3 -m fsdp_trace examples/gen_model.py:factory \
  --args model=gpt2 layers=4 dim=64 heads=4 seq=32 vocab=256 batch=4 -o "$out/gpt2-traced.mlir"
"$build/tools/fsdp-opt" "$out/gpt2-traced.mlir" --lr=3e-3 --world-size=2 \
  --wrap=class:GPT2Block --units -o "$out/gpt2-traced.plan" 2>/dev/null
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$build/tools/fsdp-run" "$out/gpt2-traced.plan" --data "$out/count.npz" --steps 20 \
  --log "$out/train-traced.jsonl" | cat
