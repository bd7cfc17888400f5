#!/usr/bin/env bash
# Installs the pinned current PyTorch (scripts/torch2-requirements.txt:
# torch 2.11, torchvision, torchaudio, transformers, safetensors) from PyPI
# into its own virtual environment, beside Debian's /usr/bin/python3 with
# torch 1.13, which stays as it is. Idempotent: a venv whose stamp matches
# the requirements file is left alone.
#
#   FSDP_TORCH2_VENV   where the venv goes (default /opt/fsdp/torch2)
#   FSDP_NO_TORCH2=1   skip it: the suites that need it say they are skipped
#
# PyPI's Linux torch wheels are CUDA builds (they run on the CPU): about
# 4.9 GB installed, 1 to 2 minutes on a machine that reaches PyPI fast.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${FSDP_TORCH2_VENV:-/opt/fsdp/torch2}"
req="$here/torch2-requirements.txt"

if [ "${FSDP_NO_TORCH2:-0}" = 1 ]; then
  echo "install-torch2: skipped (FSDP_NO_TORCH2=1)"
  exit 0
fi
stamp="$venv/.fsdp-requirements"
if [ -x "$venv/bin/python" ] && [ -r "$stamp" ] && cmp -s "$req" "$stamp"; then
  echo "install-torch2: $venv present ($(grep -m1 '^torch==' "$req"))"
  exit 0
fi
if [ ! -w "$(dirname "$venv")" ] && ! mkdir -p "$(dirname "$venv")" 2>/dev/null; then
  echo "install-torch2: cannot write $(dirname "$venv"); run as root or set FSDP_TORCH2_VENV" >&2
  exit 1
fi
start=$(date +%s)
echo "install-torch2: creating $venv (torch from PyPI, several GB)"
rm -rf "$venv.tmp"
/usr/bin/python3 -m venv "$venv.tmp"
"$venv.tmp/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
  -r "$req"
cp "$req" "$venv.tmp/.fsdp-requirements"
# Built aside and moved in whole, so an interrupted install leaves no venv
# that looks complete (the suites call "$venv/bin/python", which needs no
# path of its own: bin/pip's shebang would).
rm -rf "$venv"
mv "$venv.tmp" "$venv"
echo "install-torch2: $venv ready in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
