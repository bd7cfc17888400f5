#!/bin/bash
# On the GPU machine (the device tool), in the repo root with .device/
# carried (scripts/device-bundle.sh): the GPU unit tests, the host link's
# rates (bench/host_link.cu), CUDA against the
# CPU backend (tests/e2e/cuda_parity.py) and the GPT-2 124M benchmark
# against PyTorch. Logs go to $OUT, which the device tool brings back.
set -uo pipefail
B=$PWD/.device
OUT=${OUT:-/tmp/fsdp-device-out}
mkdir -p "$OUT" "$B/lib"
tar -xJf "$B/libs.tar.xz" -C "$B/lib"
# CUDA's libraries from the image: the toolkit's, or PyTorch's wheels'.
# cuDNN (opened at run time for attention) from the same places.
for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
  p=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
  [ -n "$p" ] && LD_LIBRARY_PATH="$(dirname "$p"):${LD_LIBRARY_PATH:-}"
done
export LD_LIBRARY_PATH="$B/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
# Each stage has its own time limit (FSDP_STAGE_LIMIT seconds, default 200),
# so a hang in one still brings back the logs of the others.
lim=${FSDP_STAGE_LIMIT:-200}
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
  ldd "$B/fsdp-run" "$B/libfsdp_cuda.so" | grep "not found" || echo "all libraries found"
} 2>&1 | tee "$OUT/setup.log"
# Each stage's exit status, for the summary line and this script's own.
declare -A rc
stage() { # stage NAME LOG COMMAND...: runs it, its output to the log too
  local name=$1 log=$2
  shift 2
  "$@" 2>&1 | tee "$OUT/$log"
  rc[$name]=${PIPESTATUS[0]}
  echo "device-check: stage $name exited ${rc[$name]}" | tee -a "$OUT/$log"
}
stage cuda-tests cuda-tests.log timeout 90 "$B/fsdp-cuda-tests"
# The host link alone and both ways at once (offload's cost model: the
# H100's both-ways figures are the A100's until this has run on one).
stage host-link host-link.log timeout 60 "$B/fsdp-host-link"
stage parity parity.log timeout "$lim" python3 tests/e2e/cuda_parity.py \
  --prepared "$B/parity" --fsdp-run "$B/fsdp-run"
stage bench bench.log timeout "$lim" python3 bench/gpt2_cuda.py \
  --run "$B/bench" --tools "$B"
cp "$B"/bench/*.jsonl "$B"/bench/results-*.json "$OUT/" 2>/dev/null
# The Llama-shaped 1.1B, where the bundle has its plan (FSDP_BUNDLE_LLAMA=1
# in device-bundle.sh): GQA, RoPE, SwiGLU at T = 2048 against eager.
if ls "$B"/llama/*.plan >/dev/null 2>&1; then
  stage llama llama.log timeout "$lim" python3 bench/gpt2_cuda.py \
    --model llama --run "$B/llama" --tools "$B"
  cp "$B"/llama/results-*.json "$OUT/" 2>/dev/null
fi
# Where the step's time goes (FSDP_CUDA_PROFILE: each kind of operation's
# share, largest first), a few steps of the benchmark's plan.
plan=$(ls "$B"/bench/*.plan 2>/dev/null | head -1)
onnx=$(ls "$B"/bench/*.onnx 2>/dev/null | head -1)
if [ -n "$plan" ] && [ -n "$onnx" ]; then
  stage profile profile.log env FSDP_CUDA_PROFILE=1 timeout 120 "$B/fsdp-run" \
    "$plan" --backend cuda --steps 4 --quiet --weights "$onnx"
fi

# One line: each stage, parity, fsdp's and eager's MFU from the same run.
summary=$(python3 - "$B"/bench/results-*.json <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"bench: no results ({e.__class__.__name__})"); sys.exit()
def col(name):
    x = r.get(name, {})
    if "error" in x or "tokens_per_s" not in x:
        return f"{name} {x.get('error', 'not run')}"
    return f"{name} {x['tokens_per_s'] / 1e3:.0f}k tok/s ({100 * x.get('mfu', 0):.1f}% MFU)"
t = r.get("target", {})
print("; ".join(col(n) for n in ("fsdp (cuda)", "torch eager", "torch.compile"))
      + f"; target {'met' if t.get('met') else 'MISSED'}")
PY
)
failed=0
line="device-check:"
for s in cuda-tests host-link parity bench profile llama; do
  [ -n "${rc[$s]:-}" ] || continue
  if [ "${rc[$s]}" = 0 ]; then line+=" $s ok"; else line+=" $s FAILED(${rc[$s]})"; failed=1; fi
done
echo "$line | $summary" | tee "$OUT/summary.log"
exit $failed
