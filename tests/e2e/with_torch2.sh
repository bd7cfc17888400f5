#!/bin/sh
# with_torch2.sh PYTHON COMMAND...: runs COMMAND when PYTHON (the pinned
# PyTorch 2.x venv's interpreter, scripts/install-torch2.sh) exists; else
# says why and exits 77, which ctest counts as skipped.
py="$1"
shift
if [ ! -x "$py" ]; then
  echo "skipped: no PyTorch 2.x interpreter at $py (make deps runs scripts/install-torch2.sh;" \
       "FSDP_NO_TORCH2=1 skips it)"
  exit 77
fi
exec "$@"
