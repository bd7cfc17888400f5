#!/bin/sh
# with_torch2.sh PYTHON COMMAND...: runs COMMAND with PYTHON, the pinned
# PyTorch 2.x venv's interpreter (scripts/install-torch2.sh). Without it the
# suite fails (exit 1): a missing dependency must not pass as green. Only
# FSDP_NO_TORCH2=1, the user asking to go without, skips it (exit 77, which
# ctest counts as skipped, and `make test` names in its last lines).
py="$1"
shift
if [ "${FSDP_NO_TORCH2:-0}" = 1 ]; then
  echo "SKIPPED: FSDP_NO_TORCH2=1 asks to run without PyTorch 2.x; this suite checked nothing"
  exit 77
fi
if [ ! -x "$py" ]; then
  echo "FAILED: no PyTorch 2.x interpreter at $py (make deps runs scripts/install-torch2.sh;" \
       "FSDP_NO_TORCH2=1 skips the suites that need it)" >&2
  exit 1
fi
exec "$@"
