#!/bin/bash
# Packs what a GPU session of the device tool needs into .device/ (ignored by
# git; name it in the run's `carry`). That machine has CUDA and PyTorch but
# neither LLVM nor Debian's libraries, so fsdp-opt cannot run there: this
# carries fsdp-run, the CUDA plugin and the GPU unit tests built here, the
# Debian libraries they load (compressed), and the model and plans of the
# GPU checks. After `make` (a CUDA build), here:
#   bash scripts/device-bundle.sh
# then one device call runs everything and brings the logs back:
#   run(command="bash scripts/device-check.sh", carry=[".device"])
set -euo pipefail
cd "$(dirname "$0")/.."
B=.device
bins="build/tools/fsdp-run build/tools/libfsdp_cuda.so build/tests/unit/fsdp-cuda-tests
  build/tools/fsdp-host-link"
for b in $bins; do
  [ -e "$b" ] || { echo "device-bundle: $b is missing: build with nvcc first (make)" >&2; exit 1; }
done
rm -rf "$B" && mkdir -p "$B/lib"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"
cp $bins "$B/"
# Every library ldd resolves but the C and C++ runtimes and CUDA's own (the
# GPU machine's image has those).
for b in $bins; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  while read -r lib; do
    case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
      libstdc++.so* | libgcc_s.so* | ld-linux* | libcudart* | libcublas* | \
      libnccl* | libcuda.so*) ;;
    *) cp -L "$lib" "$B/lib/" ;;
    esac
  done
tar -cJf "$B/libs.tar.xz" -C "$B/lib" . && rm -rf "$B/lib"
/usr/bin/python3 tests/e2e/cuda_parity.py --prepare "$B/parity" \
  --fsdp-opt build/tools/fsdp-opt --generator examples/gen_model.py
# The benchmark's plan; its 0.5 GB model is made again on the GPU machine.
prep=$(mktemp -d)
/usr/bin/python3 bench/gpt2_cuda.py --prepare "$prep" >/dev/null
mkdir -p "$B/bench" && cp "$prep"/*.plan "$B/bench/" && rm -rf "$prep"
# FSDP_BUNDLE_LLAMA=1: the Llama-shaped 1.1B's plan too (its 4.4 GB model
# exported here first, minutes on two cores; made again there), which
# device-check.sh then benchmarks as well.
if [ "${FSDP_BUNDLE_LLAMA:-0}" = 1 ]; then
  prep=$(mktemp -d)
  /usr/bin/python3 bench/gpt2_cuda.py --model llama --prepare "$prep" >/dev/null
  mkdir -p "$B/llama" && cp "$prep"/*.plan "$B/llama/" && rm -rf "$prep"
fi
du -sh "$B"
