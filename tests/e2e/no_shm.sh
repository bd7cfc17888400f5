#!/bin/sh
# no_shm.sh MODE CMD...: runs CMD (a torchrun worker) where it cannot use
# /dev/shm, in a mount namespace of its own (unshare -m, private mounts):
#   all    every rank sees a read-only /dev/shm (rank 0 cannot make the
#          segment);
#   rank1  local rank 1 sees an empty /dev/shm of its own (rank 0 makes the
#          segment, rank 1 cannot open it).
# Gloo's ranks must then all fall back to TCP (runtime/comm/GlooComm.cpp).
mode=$1
shift
case "$mode" in
all) opts=ro,size=1m ;;
rank1) [ "${LOCAL_RANK:-0}" = 1 ] || exec "$@"; opts=size=1m ;;
*) echo "no_shm.sh: MODE is all or rank1, not '$mode'" >&2; exit 2 ;;
esac
exec unshare -m sh -c "mount -t tmpfs -o $opts tmpfs /dev/shm && exec \"\$@\"" sh "$@"
