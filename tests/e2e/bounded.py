"""subprocess.run with a deadline: a child that hangs (a rank waiting on a
peer that died, a reader stuck on a FIFO) fails the suite with a
TimeoutExpired naming the command, instead of holding CI until ctest's own
TIMEOUT. A call may pass its own `timeout`."""
import subprocess

DEADLINE = 600  # seconds; the slowest child here takes about 20


def run(*args, **kwargs):
    kwargs.setdefault("timeout", DEADLINE)
    return subprocess.run(*args, **kwargs)
