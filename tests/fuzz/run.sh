#!/usr/bin/env bash
# Builds the fuzzers with clang-22 + libFuzzer + ASan in build-fuzz/, seeds
# a corpus, and fuzzes for ${1:-600} seconds. ${2:-import} picks the target:
# `import` (the ONNX importer) or `runtime` (plan parser and safetensors
# reader). Crashing inputs are written to build-fuzz/crashes/.
set -euo pipefail
seconds=${1:-600}
target=${2:-import}
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
ninja -C "$out" fsdp-import-fuzzer fsdp-runtime-fuzzer
mkdir -p "$out/crashes"
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0}

if [ "$target" = runtime ]; then
  corpus="$out/corpus-runtime"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    tmp=$(mktemp -d)
    /usr/bin/python3 "$root/examples/gen_model.py" mlp -o "$tmp/m.onnx" --loss mse --dim 4
    "$out/tools/fsdp-opt" "$tmp/m.onnx" -o "$tmp/m.plan" 2>/dev/null ||
      "$root/build/tools/fsdp-opt" "$tmp/m.onnx" -o "$tmp/m.plan"
    "$root/build/tools/fsdp-run" "$tmp/m.plan" --steps 1 --quiet \
      --save-full "$tmp/w.safetensors"
    { printf '\x00'; cat "$tmp/m.plan"; } > "$corpus/plan"
    { printf '\x01'; cat "$tmp/w.safetensors"; } > "$corpus/safetensors"
    rm -rf "$tmp"
  fi
  exec "$out/tests/fuzz/fsdp-runtime-fuzzer" "$corpus" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/"
fi

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
# (ASAN_OPTIONS above: LLVM's headers poison BumpPtrAllocator slabs when
# compiled with ASan, but Debian's libLLVM/libMLIR are not ASan builds and
# never unpoison, so manual poisoning would give false reports.)
"$out/tests/fuzz/fsdp-import-fuzzer" "$corpus" -max_total_time="$seconds" \
  -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$out/crashes/"
