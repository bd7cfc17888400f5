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
for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
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
timeout 90 "$B/fsdp-cuda-tests" 2>&1 | tee "$OUT/cuda-tests.log"
# The host link alone and both ways at once (offload's cost model: the
# H100's both-ways figures are the A100's until this has run on one).
timeout 60 "$B/fsdp-host-link" 2>&1 | tee "$OUT/host-link.log"
timeout "$lim" python3 tests/e2e/cuda_parity.py --prepared "$B/parity" \
  --fsdp-run "$B/fsdp-run" 2>&1 | tee "$OUT/parity.log"
timeout "$lim" python3 bench/gpt2_cuda.py --run "$B/bench" --tools "$B" 2>&1 | tee "$OUT/bench.log"
cp "$B"/bench/*.jsonl "$B"/bench/results-*.json "$OUT/" 2>/dev/null
true
