"""What the property suites (dropout.py, draws.py) share: a named check that
prints ok or FAIL and is counted, a tool run that must succeed, and a step
log's losses."""
import argparse
import json

import bounded

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(argv, **kw):
    """Runs a tool, which must exit 0 (its stderr's tail otherwise)."""
    r = bounded.run(argv, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr[-800:]}")
    return r


def losses(path):
    """The losses of a --log step log, in order."""
    return [json.loads(line)["loss"] for line in open(path)]


def tools():
    """fsdp-opt's and fsdp-run's paths, from --fsdp-opt and --fsdp-run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    a = ap.parse_args()
    return a.fsdp_opt, a.fsdp_run
