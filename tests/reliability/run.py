#!/usr/bin/env python3
"""The reliability suite: bad input and faults, end to end, through the real
binaries (issue 23's classes). Every case is run, classified, and counted:

  clean error    exit non-zero with a message naming the file, flag or rank
                 (the case's pattern), nothing else changed
  correct        exit 0 and the case's own check holds
  crash          a signal, an abort, a sanitizer report, LLVM ERROR
  hang           still running at the case's deadline
  wrong success  exit 0 where an error was due, or a check that failed
  wrong failure  exit non-zero where the case should have run
  unclear error  exit non-zero, but the message does not say what is wrong
  data loss      a file the case protects changed or vanished

Files a case protects are hashed before and compared after, so "earlier
files are byte-identical" is checked, not assumed. Cases that need root
(tmpfs mounts for full and read-only disks, device nodes) or mpirun are
skipped with a message where they cannot run. Prints one table, the form
of issue 23's, and exits 1 if any case is not a clean error or correct.

    tests/reliability/run.py --build build [--only CLASS] [-v]
"""
import argparse
import os
import sys
import tempfile

from cases import CLASSES
from harness import ROOT, Suite, fixtures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", help="comma-separated: " + ",".join(CLASSES))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    chosen = a.only.split(",") if a.only else list(CLASSES)
    with tempfile.TemporaryDirectory(prefix="fsdp-reliability-") as tmp:
        s = Suite(os.path.abspath(a.build), tmp, a.verbose)
        fixtures(s)
        for name in chosen:
            CLASSES[name](s)
        print(s.table())
        for line in s.skips:
            print(line)
        if s.failures:
            print(f"\n{len(s.failures)} failing:")
            for line in s.failures:
                print("  " + line)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
