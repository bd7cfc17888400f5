"""scripts/torchrun.py on a port the system picks now, so lit tests that run
at once never share one (%free_port is one port for the whole lit run, and
tests that need it free must have it to themselves).

    torchrun_any_port.py --nproc_per_node 2 --no_python fsdp-run PLAN ...
"""
import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
sys.exit(subprocess.call([sys.executable, os.path.join(ROOT, "scripts", "torchrun.py"),
                          "--master_port", str(port)] + sys.argv[1:]))
