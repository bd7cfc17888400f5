#!/usr/bin/env bash
# Builds the fuzzers with clang-22 + libFuzzer + ASan in build-fuzz/, seeds
# a corpus, and fuzzes for ${1:-600} seconds. ${2:-import} picks the target:
# `import` (the ONNX importer), or one of the runtime's readers: `plan`,
# `safetensors`, `manifest`, `npz`, `bin`, `trace` (tests/fuzz/
# RuntimeFuzzer.cpp). Crashing inputs are written to build-fuzz/crashes/.
set -euo pipefail
seconds=${1:-600}
target=${2:-import}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build-fuzz"
san="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer -g"
readers="plan safetensors manifest npz bin trace"
if [ ! -f "$out/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DFSDP_ENABLE_FUZZ=ON -DFSDP_ENABLE_CUDA=OFF \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
if [ "$target" = import ]; then
  ninja -C "$out" fsdp-import-fuzzer
else
  case " $readers " in *" $target "*) ;; *)
    echo "run.sh: unknown target '$target' (import $readers)" >&2; exit 2;;
  esac
  ninja -C "$out" "fsdp-fuzz-$target"
fi
mkdir -p "$out/crashes"
# (alloc_dealloc_mismatch=0: libFuzzer's own seed-corpus sort, built with
# libstdc++ 12's temporary buffers, frees with free() what operator
# new(nothrow) gave; reported before the first input runs.)
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:alloc_dealloc_mismatch=0}

if [ "$target" != import ]; then
  # Fixtures: a GPT-2 plan (token inputs), an MLP plan (f32 inputs) and a
  # traced plan with 0-dim and 1-dim boolean, integer and float inputs,
  # and one valid file of each kind from real runs (the release build's
  # tools write them; `make build` first).
  fix="$out/fixtures"
  tools="$root/build/tools"
  if [ ! -f "$fix/done" ]; then
    rm -rf "$fix" && mkdir -p "$fix"
    /usr/bin/python3 "$root/examples/gen_model.py" gpt2 -o "$fix/gpt2.onnx" \
      --loss --layers 1 --dim 16 --seq 8 --vocab 32 --heads 2 --batch 2
    /usr/bin/python3 "$root/examples/gen_model.py" mlp -o "$fix/mlp.onnx" \
      --loss mse --dim 4
    # A traced model whose step inputs are 0-dim and 1-dim, boolean,
    # integer and float (no batch dimension to index rows by).
    PYTHONPATH="$root/python" /usr/bin/python3 -m fsdp_trace \
      "$root/tests/lit/frontend/Inputs/traced_models.py:scalars" -o "$fix/scalars.mlir"
    "$tools/fsdp-opt" "$fix/gpt2.onnx" -o "$fix/gpt2.plan"
    "$tools/fsdp-opt" "$fix/mlp.onnx" -o "$fix/mlp.plan"
    "$tools/fsdp-opt" "$fix/scalars.mlir" -o "$fix/scalars.plan"
    "$tools/fsdp-run" "$fix/gpt2.plan" --steps 2 --quiet \
      --save-full "$fix/w.safetensors" --checkpoint-dir "$fix/ck" \
      --trace "$fix/trace.json"
    /usr/bin/python3 - "$fix" <<'PY'
import sys, numpy as np
d = sys.argv[1]
h = np.zeros(256, np.int32); h[:3] = (20240520, 1, 200)
open(d + "/tokens.bin", "wb").write(h.tobytes() + (np.arange(200) % 32).astype(np.uint16).tobytes())
np.savez(d + "/gpt2.npz", input_ids=np.zeros((4, 8), np.int64), targets=np.ones((4, 8), np.int64))
np.savez(d + "/mlp.npz", x=np.zeros((4, 8), np.float32), targets=np.ones((4, 4), np.float32))
np.savez(d + "/scalars.npz", cond=np.array(True), idx=np.array(2, np.int64),
         x=np.array(1.5, np.float32), ids=np.array([0, 4, 1, 1], np.int64))
PY
    touch "$fix/done"
  fi
  export FSDP_FUZZ_PLANS="$fix/gpt2.plan:$fix/mlp.plan:$fix/scalars.plan"
  corpus="$out/corpus-$target"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    # (the data and trace readers' first byte picks the fixture plan)
    case $target in
      plan) cp "$fix/gpt2.plan" "$fix/mlp.plan" "$corpus/";;
      safetensors) cp "$fix/w.safetensors" "$corpus/";
        cp "$fix"/ck/step-2/*.safetensors "$corpus/";;
      manifest) cp "$fix/ck/step-2/manifest.json" "$corpus/";;
      npz) { printf '\x00'; cat "$fix/gpt2.npz"; } > "$corpus/gpt2";
        { printf '\x01'; cat "$fix/mlp.npz"; } > "$corpus/mlp";
        { printf '\x02'; cat "$fix/scalars.npz"; } > "$corpus/scalars";;
      bin) { printf '\x00'; cat "$fix/tokens.bin"; } > "$corpus/tokens";;
      trace) { printf '\x00'; cat "$fix/trace.json"; } > "$corpus/trace";;
    esac
  fi
  exec "$out/tests/fuzz/fsdp-fuzz-$target" "$corpus" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/$target-"
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
