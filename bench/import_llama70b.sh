#!/usr/bin/env bash
# Compile benchmark: a Llama-3-70B-shaped model (shape only, external data in a
# sparse file) imported by fsdp-opt (targets 2 s, 500 MB RSS) and compiled to a
# full-shard plan for 1024 ranks (targets 5 s, 1 GB RSS)
# on the 2-core development machine. Prints each run and the median.
set -euo pipefail
build=${1:-build}
runs=${RUNS:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
[ -f "$out/llama3-70b.onnx" ] || /usr/bin/python3 "$root/bench/make_shape_model.py" "$out" --model llama3-70b
opt="$build/tools/fsdp-opt"
echo "model: $(du -h --apparent-size "$out/llama3-70b.onnx" | cut -f1) graph," \
     "$(du -h --apparent-size "$out/llama3-70b.bin" | cut -f1) sparse weights" \
     "($(du -h "$out/llama3-70b.bin" | cut -f1) on disk)"
"$opt" "$out/llama3-70b.onnx" --batch-size=1 --summary | tail -2
# measure LABEL MAX_SECONDS MAX_MIB ARGS...: RUNS runs of fsdp-opt ARGS, the
# median time and the peak RSS against the targets.
measure() {
  local label=$1 max_s=$2 max_mib=$3
  shift 3
  local times=() peak=0 line t kb
  for i in $(seq "$runs"); do
    line=$(/usr/bin/time -f "%e %M" "$opt" "$@" 2>&1 >/dev/null | tail -1)
    t=${line% *}; kb=${line#* }
    echo "$label run $i: ${t} s, $((kb / 1024)) MiB max RSS"
    times+=("$t")
    [ "$kb" -gt "$peak" ] && peak=$kb
  done
  local median verdict
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  verdict=$(awk -v t="$median" -v m="$peak" -v T="$max_s" -v M="$max_mib" \
              'BEGIN {print (t < T && m < M*1024) ? "met" : "MISSED"}')
  echo "$label llama-3-70b shape: median ${median} s, peak $((peak / 1024)) MiB" \
       "(targets < $max_s s, < $max_mib MB: $verdict)"
}
measure import 2 500 "$out/llama3-70b.onnx" --batch-size=1 -o /dev/null
# The whole pipeline to a plan: training step, units, full-shard over 1024
# ranks, collectives, schedule, memory plan, verification, the JSON plan.
measure plan 5 1000 "$out/llama3-70b.onnx" --batch-size=1 --loss=cross-entropy \
  --world-size=1024 --strategy=full-shard -o "$out/llama3-70b-1024.plan"
# The same shape from PyTorch: examples/gen_model.py's Llama built on the
# meta device and traced by python/fsdp_trace (no ONNX, no weights), then
# the same plan from its MLIR.
line=$(/usr/bin/time -f "%e %M" env PYTHONPATH="$root/python" /usr/bin/python3 -m fsdp_trace \
  "$root/examples/gen_model.py:factory" --args model=llama vocab=128256 dim=8192 \
  layers=80 heads=64 kv_heads=8 ffn=28672 seq=8192 batch=1 --meta \
  -o "$out/llama3-70b-traced.mlir" 2>&1 >/dev/null | tail -1)
echo "trace llama-3-70b shape (python3 -m fsdp_trace --meta): ${line% *} s," \
     "$((${line#* } / 1024)) MiB max RSS, $(du -h --apparent-size \
     "$out/llama3-70b-traced.mlir" | cut -f1) of MLIR"
measure traced-plan 5 1000 "$out/llama3-70b-traced.mlir" \
  --world-size=1024 --strategy=full-shard -o "$out/llama3-70b-traced-1024.plan"
# The tuning page of the 1024-rank plan: written in seconds, a few MB.
line=$(/usr/bin/time -f "%e %M" "$build/tools/fsdp-inspect" "$out/llama3-70b-1024.plan" \
  --html "$out/llama3-70b-1024.html" 2>&1 >/dev/null | tail -1)
echo "page llama-3-70b 1024 ranks (fsdp-inspect --html): ${line% *} s," \
     "$((${line#* } / 1024)) MiB max RSS, $(du -h --apparent-size \
     "$out/llama3-70b-1024.html" | cut -f1)"
