#!/usr/bin/env python3
"""torchrun, with Debian 12's defect worked around.

Debian's torchrun (torch 1.13 on Python 3.11) dies before it starts a
worker: `Std.from_str("0")` looks the value up by iterating the `Std` flag
enum, and Python 3.11 no longer yields the zero member (`Std.NONE`) when
iterating a flag, so the default `--redirects 0` becomes None and
`to_map(None, ...)` raises AttributeError. Constructing the member by value
works on every Python; that is all this patch changes. Everything else is
torch.distributed.run's own main:

    python3 scripts/torchrun.py --nproc_per_node 2 --no_python \\
        build/tools/fsdp-run model.plan
"""
import sys

from torch.distributed.elastic.multiprocessing import api


def _std_from_str(text):
    if ":" in text:  # "0:1,1:2": a value per local rank
        return {int(rank): api.Std(int(value))
                for rank, value in (item.split(":") for item in text.split(","))}
    return api.Std(int(text))


api.Std.from_str = staticmethod(_std_from_str)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
