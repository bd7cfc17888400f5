#!/usr/bin/env bash
# Builds the ONNX importer fuzzer with clang-22 + libFuzzer + ASan in
# build-fuzz/, seeds a corpus from generated models, and fuzzes for
# ${1:-600} seconds. Crashing inputs are written to build-fuzz/crashes/.
set -euo pipefail
seconds=${1:-600}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build-fuzz"
san="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer -g"
if [ ! -f "$out/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DFSDP_ENABLE_FUZZ=ON -DFSDP_ENABLE_CUDA=OFF \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$out" fsdp-import-fuzzer

corpus="$out/corpus"
if [ ! -d "$corpus" ]; then
  mkdir -p "$corpus"
  for m in gpt2 llama bert mlp; do
    /usr/bin/python3 "$root/examples/gen_model.py" $m -o "$corpus/$m.onnx" \
      --layers 1 --dim 16 --seq 8 --vocab 32 --heads 2 --kv-heads 1
  done
  for k in valid unknown-domain cycle duplicate-name raw-data-length \
           unsupported shape-mismatch dynamic-batch; do
    /usr/bin/python3 "$root/tests/frontend/make_bad_model.py" $k -o "$corpus/bad-$k.onnx"
  done
  # (no `find | head` under pipefail: head's early exit would kill the script)
  mapfile -t nodes < <(find /usr/share/libonnx-testdata/data/node -name model.onnx | sort)
  for f in "${nodes[@]:0:300}"; do
    cp "$f" "$corpus/node-$(basename "$(dirname "$f")").onnx"
  done
fi
mkdir -p "$out/crashes"
# LLVM's headers poison BumpPtrAllocator slabs when compiled with ASan, but the
# Debian libLLVM/libMLIR they pair with are not ASan builds and never unpoison:
# manual poisoning gives false use-after-poison reports, so it is turned off.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0}
"$out/tests/fuzz/fsdp-import-fuzzer" "$corpus" -max_total_time="$seconds" \
  -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$out/crashes/"
