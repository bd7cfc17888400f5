#!/usr/bin/env bash
# Installs the headers of NVIDIA's cudnn-frontend (C++, header-only) from
# its pinned PyPI wheel, for the CUDA backend's cuDNN attention
# (runtime/backends/cuda/CudnnAttention.cpp). Only where nvcc is found: the
# CUDA backend is not built elsewhere. Idempotent: present headers are left
# alone. cuDNN itself comes with the CUDA toolkit and is loaded at run time.
#
#   FSDP_CUDNN_FRONTEND_DIR   where the headers go
#                             (default /opt/fsdp/cudnn-frontend-$version)
set -euo pipefail
version=1.32.0
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dir="${FSDP_CUDNN_FRONTEND_DIR:-/opt/fsdp/cudnn-frontend-$version}"

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-cudnn-frontend: no nvcc, no CUDA backend: skipped"
  exit 0
fi
if [ -r "$dir/include/cudnn_frontend.h" ]; then
  echo "install-cudnn-frontend: $dir present (cudnn-frontend $version)"
  exit 0
fi
if [ ! -w "$(dirname "$dir")" ] && ! mkdir -p "$(dirname "$dir")" 2>/dev/null; then
  echo "install-cudnn-frontend: cannot write $(dirname "$dir"); run as root or set FSDP_CUDNN_FRONTEND_DIR" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The wheel's C++ headers are the same for every Python; this tag is the
# one PyPI has for CPython 3.11 on x86_64 Linux.
python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.11 --platform manylinux_2_28_x86_64 \
  "nvidia-cudnn-frontend==$version" -d "$tmp"
wheel=$(ls "$tmp"/nvidia_cudnn_frontend-"$version"-*.whl)
if [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$sha256" ]; then
  echo "install-cudnn-frontend: $wheel does not have the pinned sha256 $sha256" >&2
  exit 1
fi
python3 - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
mkdir -p "$dir"
rm -rf "$dir/include.new"
mv "$tmp/x/include" "$dir/include.new"
mv "$dir/include.new" "$dir/include"
echo "install-cudnn-frontend: cudnn-frontend $version headers in $dir/include"
