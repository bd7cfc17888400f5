#!/usr/bin/env bash
# Import benchmark: a Llama-3-70B-shaped model (shape only, external data in a
# sparse file) imported by fsdp-opt. Targets: under 2 s and under 500 MB RSS
# on the 2-core development machine. Prints each run and the median.
set -euo pipefail
build=${1:-build}
runs=${RUNS:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
[ -f "$out/llama70b.onnx" ] || /usr/bin/python3 "$root/bench/make_llama70b.py" "$out"
opt="$build/tools/fsdp-opt"
echo "model: $(du -h --apparent-size "$out/llama70b.onnx" | cut -f1) graph," \
     "$(du -h --apparent-size "$out/llama70b.bin" | cut -f1) sparse weights" \
     "($(du -h "$out/llama70b.bin" | cut -f1) on disk)"
"$opt" "$out/llama70b.onnx" --batch-size=1 --summary | tail -2
times=()
peak=0
for i in $(seq "$runs"); do
  line=$(/usr/bin/time -f "%e %M" "$opt" "$out/llama70b.onnx" --batch-size=1 \
           -o /dev/null 2>&1 >/dev/null | tail -1)
  t=${line% *}; kb=${line#* }
  echo "run $i: ${t} s, $((kb / 1024)) MiB max RSS"
  times+=("$t")
  [ "$kb" -gt "$peak" ] && peak=$kb
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
verdict=$(awk -v t="$median" -v m="$peak" 'BEGIN {print (t < 2 && m < 500*1024) ? "met" : "MISSED"}')
echo "import llama-3-70b shape: median ${median} s, peak $((peak / 1024)) MiB" \
     "(targets < 2 s, < 500 MB: $verdict)"
