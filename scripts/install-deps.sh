#!/usr/bin/env bash
# Installs the Debian 12 packages fsdp needs to build and test.
# Idempotent: when every package is already installed it only checks and exits.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools
  clang-22 libfuzzer-22-dev libclang-rt-22-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin libgloo-dev libopenblas-dev libdnnl-dev
  nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
  python3-onnx python3-torch python3-torchvision python3-torchaudio python3-numpy python3-pil chromium
  python3-venv
)

if [ ! -r /etc/os-release ] || ! grep -q '^VERSION_ID="12"' /etc/os-release \
   || ! grep -q '^ID=debian' /etc/os-release; then
  echo "install-deps: this script supports Debian 12 (bookworm) only;" >&2
  echo "  install these packages by other means: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "  run as root (or: sudo $0) to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
