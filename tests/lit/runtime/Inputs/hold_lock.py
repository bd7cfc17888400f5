"""hold_lock.py LOCK -- CMD...: holds an flock on LOCK (as a running
fsdp-run would, with its holder line) while CMD runs; exits with CMD's
status."""
import fcntl
import subprocess
import sys

lock, cmd = sys.argv[1], sys.argv[3:]
with open(lock, "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.truncate(0)
    f.write("pid 4242 on testhost\n")
    f.flush()
    sys.exit(subprocess.run(cmd).returncode)
