#!/usr/bin/env bash
# make test's last step: ctest over BUILD ($1), then one loud line naming
# every suite that was skipped (the GPU suites without a GPU, the PyTorch
# 2.x suites under FSDP_NO_TORCH2=1): a skipped suite checked nothing.
set -uo pipefail
build=${1:-build}
shift || true
cd "$build" || exit 1
ctest --output-on-failure -j2 "$@" 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p' ctest.log | tr '\n' ' ')
if [ -n "$skipped" ]; then
  echo "make test: SKIPPED, checked nothing: ${skipped}(cuda-parity needs a GPU;"\
       "the torch2 suites need /opt/fsdp/torch2 unless FSDP_NO_TORCH2=1)"
fi
exit "$rc"
