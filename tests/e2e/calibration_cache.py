#!/usr/bin/env python3
"""--device=cpu is this machine: fsdp-opt's default device is the
calibration fsdp-run measures and caches (costmodel/ThisMachine.h,
runtime/run/Calibration.h). In caches of its own (FSDP_CACHE_DIR), this
checks that

  - the first compile measures this machine and fits it to the reference
    runs (saying so on stderr), the plan names the calibration (its name
    and file), and the next compile reuses it without a word;
  - a cache measured on another CPU, with another thread count or in an
    older format is noticed and measured again;
  - a corrupt cache (not JSON, a negative rate, a malformed fitted cost, a
    directory in its place) is measured again or refused with a clean error,
    never a crash; an unwritable cache directory is a clean error naming it;
  - world sizes above 1 get the collective engine's own calibration: MPI's
    under mpirun (the default launcher), Gloo's with --launcher=torchrun;
  - --device=cpu-generic (what the other suites plan for) measures nothing,
    and FSDP_DEVICE sets the default a --device flag overrides;
  - fsdp-run's measured steps of plans priced on the calibration correct it
    (observed_steps, step_correction), and one marked unreliable is said so
    at every compile until they have.

    calibration_cache.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    return 0


def run(a, tmp):
    model = os.path.join(tmp, "gpt2.onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"), "gpt2",
                    "--loss", "--dynamic-batch", "--dim", "32", "--layers", "1", "--heads", "2",
                    "--seq", "16", "--vocab", "64", "-o", model], check=True,
                   stdout=subprocess.DEVNULL)
    # One small reference model keeps each fit to a second (the installed
    # set is fitted once, in the first case).
    refs = os.path.join(tmp, "refs")
    os.makedirs(refs)
    shutil.copy(model, os.path.join(refs, "tiny.onnx"))
    with open(os.path.join(refs, "references.txt"), "w") as f:
        f.write("tiny.onnx --batch-size=4\ntiny.onnx --batch-size=8\n")
    cache = os.path.join(tmp, "cache")
    base = {k: v for k, v in os.environ.items()
            if k not in ("FSDP_DEVICE", "FSDP_REFERENCES", "OMP_NUM_THREADS")}
    base["FSDP_CACHE_DIR"] = cache

    def opt(*flags, env=None, refs_dir=refs):
        e = dict(base, **(env or {}))
        if refs_dir:
            e["FSDP_REFERENCES"] = refs_dir
        plan = os.path.join(tmp, "out.plan")
        if os.path.exists(plan):
            os.remove(plan)
        r = subprocess.run([a.fsdp_opt, model, "--batch-size=4", "-o", plan] + list(flags),
                           env=e, capture_output=True, text=True, timeout=600)
        predicted = json.load(open(plan))["predicted"] if r.returncode == 0 else None
        return r, predicted

    def crashed(r):
        return r.returncode < 0 or r.returncode > 1

    none = os.path.join(cache, "calibration-none.json")

    # The first compile measures and fits, with the installed references.
    r, p = opt(refs_dir=None)
    check(r.returncode == 0, f"first compile succeeds ({r.stderr[-300:]!r})")
    check("measuring this machine" in r.stderr, "the first compile says it measures")
    check("fitting this machine's calibration" in r.stderr, "... and fits it to reference runs")
    cal = json.load(open(none))
    check(cal.get("fitted_runs", 0) >= 4 and "op_cost" in cal and "op_overhead" in cal,
          f"the cache holds a fitted calibration ({cal.get('fitted_runs')} runs)")
    # Each installed reference runs twice (the second pass reversed, so the
    # machine's drift spreads evenly over them), and the fit takes the
    # faster run of each.
    installed = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.fsdp_opt))),
                             "share", "fsdp", "calibration", "references.txt")
    listed = [l for l in open(installed).read().splitlines()
              if l.strip() and not l.lstrip().startswith("#")]
    check(cal.get("reference_runs") == 2 * len(listed) and "each run twice" in r.stderr,
          f"each of the {len(listed)} references runs twice ({cal.get('reference_runs')} runs)")
    check(cal.get("fitted_runs") == len(listed) and
          f"fitted to {len(listed)} reference runs (the faster of {2 * len(listed)})" in cal["name"],
          f"the fit takes one run of each ({cal.get('fitted_runs')} runs): {cal['name']}")
    # Attention is fitted per query row, with no fixed cost per instruction
    # (common/CostRows.h).
    att = cal.get("op_cost", {}).get("attention", [])
    check(len(att) == 3 and att[2] > 0 and cal["op_overhead"].get("attention") == 0,
          f"attention is priced per query row ({att}, fixed "
          f"{cal['op_overhead'].get('attention')})")
    # A GEMM's cost per flop is the measured block-product rate (the fourth
    # term: its price per byte), and serial loops are fitted apart.
    mm = cal.get("op_cost", {}).get("matmul", [])
    check(len(mm) == 4 and mm[0] > 0 and mm[1] == 0 and mm[2] == 0,
          f"matmul is priced per flop and per byte ({mm})")
    check(any(k.endswith(".serial") or ".serial." in k for k in cal.get("op_cost", {})),
          "serial loops are fitted apart (OP.serial)")
    # The drift of the machine's speed while it was measured: a number, and
    # in the name each plan carries.
    drift = cal.get("speed_drift")
    check(isinstance(drift, (int, float)) and drift >= 0
          and f"its speed moved {round(100 * drift)}% meanwhile" in cal["name"],
          f"the calibration says how far the machine's speed moved ({drift}, {cal['name']!r})")
    check(cal["machine"]["engine"] == "none" and cal["machine"]["cores"] >= 1,
          "the cache names the machine it measured")
    check(p and p["device"] == cal["name"] and p["device"].startswith("cpu: "),
          f"the plan names its calibration ({p and p['device']!r})")
    check(p and p["device_file"] == none, "the plan names the calibration's file")
    check(os.path.exists(os.path.join(cache, "calibration-none.fit.txt")),
          "the fit's table lies beside the cache")
    first = p["step_seconds"] if p else None

    r, p = opt()
    check(r.returncode == 0 and "measuring" not in r.stderr and "fitting" not in r.stderr,
          "the second compile reuses the cache silently")
    check(p and p["step_seconds"] == first, "... and prices the plan the same")

    # A calibration that heals: each run of 4 steps or more of a plan priced
    # on it records its measured step (observed_steps), and from three on
    # their median corrects every plan priced after it (step_correction).
    # A plan priced on anything else records nothing.
    # A model large enough (steps of milliseconds) that the machine's noise
    # moves its steps less than the quarter of their median beyond which a
    # run records nothing (ctest runs this suite alone: RUN_SERIAL). A run
    # on other threads than the plan was priced for records nothing either.
    bigger = os.path.join(tmp, "bigger.onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"), "gpt2",
                    "--loss", "--dynamic-batch", "--dim", "128", "--layers", "2", "--heads",
                    "2", "--seq", "64", "--vocab", "256", "-o", bigger], check=True,
                   stdout=subprocess.DEVNULL)
    healed = os.path.join(tmp, "heal.plan")
    generic = os.path.join(tmp, "generic.plan")
    for plan, device in ((healed, []), (generic, ["--device=cpu-generic"])):
        subprocess.run([a.fsdp_opt, bigger, "--batch-size=8", "-o", plan] + device,
                       env=base, check=True, capture_output=True)

    def run_plan(plan, *extra):
        """(exit status, whether its steps lay within a quarter of their
        median: the runs fsdp-run records)."""
        log = os.path.join(tmp, "heal.jsonl")
        r = subprocess.run([a.fsdp_run, plan, "--steps", "16", "--quiet", "--log", log] +
                           list(extra), env=base, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return r.returncode, False
        ms = sorted([json.loads(l)["step_ms"] for l in open(log)][1:])
        at = lambda q: ms[int(q * (len(ms) - 1))]
        return 0, at(0.9) - at(0.1) <= 0.25 * at(0.5)
    runs = [run_plan(generic)[0]]
    if int(json.load(open(healed))["predicted"]["threads_per_rank"]) > 1:
        runs.append(run_plan(healed, "--threads", "1")[0])
    check(runs == [0] * len(runs) and not json.load(open(none)).get("observed_steps"),
          "a run of a cpu-generic plan, or on other threads than priced, records nothing")
    # A run whose steps spread by more than a quarter of their median (a
    # busy machine) records nothing, so this runs the plan until three have
    # been recorded, at most ten times; each steady run must be recorded.
    steady = 0
    for _ in range(10):
        rc, ok = run_plan(healed)
        runs.append(rc)
        steady += ok
        if len(json.load(open(none)).get("observed_steps", [])) >= 3:
            break
    cal = json.load(open(none))
    seen = cal.get("observed_steps", [])
    if steady < 3 and len(seen) == steady and runs == [0] * len(runs):
        print(f"NOT CHECKED: only {steady} of 10 runs were steady (this machine is busy): "
              f"each was recorded, but the correction needs three", flush=True)
    else:
        check(runs == [0] * len(runs) and len(seen) == 3 and all(x > 0 for x in seen) and
              cal.get("step_correction") == sorted(seen)[1],
              f"three steady runs priced on the calibration are recorded and their "
              f"median corrects it ({seen}, {cal.get('step_correction')})")
        r, p = opt()
        corr = cal.get("step_correction", 0)
        check(r.returncode == 0 and p and p.get("step_correction") == corr and first and
              abs(p["step_seconds"] - first * corr) <= 1e-6 * first * corr,
              f"the next compile is priced with the correction ({first} -> "
              f"{p and p['step_seconds']}, x{corr})")
    # One measured while the machine's speed moved past what fsdp-run
    # keeps as good is unreliable: every compile says so until three
    # measured runs have corrected it.
    keep = json.load(open(none))

    def unreliable(observed):
        d = dict(keep, unreliable="its speed moved 40% while it was measured, twice",
                 observed_steps=observed)
        d.pop("step_correction", None)
        with open(none, "w") as f:
            json.dump(d, f)
        return opt()[0]
    r = unreliable([])
    check(r.returncode == 0 and "is unreliable: its speed moved 40%" in r.stderr and
          "3 more run(s)" in r.stderr, f"an unreliable calibration is said at every compile "
          f"({r.stderr[-300:]!r})")
    r = unreliable([1.1, 1.2, 1.3])
    check(r.returncode == 0 and "unreliable" not in r.stderr,
          "... until three measured runs correct it")
    with open(none, "w") as f:
        json.dump(keep, f)

    def tamper(edit):
        d = json.load(open(none))
        edit(d)
        with open(none, "w") as f:
            json.dump(d, f)

    # Stale caches are measured again, and say why.
    tamper(lambda d: d["machine"].__setitem__("cpu", "Some Other CPU 9000"))
    r, p = opt()
    check(r.returncode == 0 and "measured with cpu" in r.stderr and
          json.load(open(none))["machine"]["cpu"] != "Some Other CPU 9000",
          "a cache from another CPU is measured again")
    r, p = opt(env={"OMP_NUM_THREADS": "1"})
    check(r.returncode == 0 and "measured with threads" in r.stderr and
          json.load(open(none))["machine"]["threads"] == 1,
          "a cache of another thread count is measured again")
    r, p = opt()  # back to this process's threads
    tamper(lambda d: d["machine"].__setitem__("format", 1))
    r, p = opt()
    check(r.returncode == 0 and "older format" in r.stderr, "an older format is measured again")

    # Corrupt caches: measured again or a clean error, never a crash.
    corrupt = {
        "garbage bytes": lambda: open(none, "wb").write(b"\x00\xff{{not json"),
        "truncated JSON": lambda: open(none, "w").write('{"flops_f32": 1e9, "mach'),
        "a negative rate": lambda: tamper(lambda d: d.__setitem__("mem_bandwidth", -5)),
        "a string rate": lambda: tamper(lambda d: d.__setitem__("flops_f32", "fast")),
        "a malformed fitted cost": lambda: tamper(
            lambda d: d["op_cost"].__setitem__("matmul", [1, "x"])),
        "a fitted cost of five terms": lambda: tamper(
            lambda d: d["op_cost"].__setitem__("attention", [0, 0, 1e-7, 1, 1])),
        "no machine": lambda: tamper(lambda d: d.pop("machine")),
    }
    for what, spoil in corrupt.items():
        spoil()
        r, p = opt()
        check(not crashed(r) and r.returncode == 0 and "measuring" in r.stderr,
              f"a cache with {what} is measured again (rc {r.returncode})")
    os.remove(none)
    os.makedirs(none)
    r, p = opt()
    check(not crashed(r) and r.returncode == 1 and none in r.stderr,
          f"a directory in the cache's place is a clean error ({r.stderr.strip()[-160:]!r})")
    os.rmdir(none)
    r, p = opt(env={"FSDP_CACHE_DIR": os.path.join(model, "cache")})
    check(not crashed(r) and r.returncode == 1 and "calibration" in r.stderr and
          os.path.join(model, "cache") in r.stderr,
          "an unwritable cache directory is a clean error naming it")

    # Engines: a plan of 2 ranks gets MPI's (mpirun) or Gloo's links.
    r, p = opt("--world-size=2")
    mpi = os.path.join(cache, "calibration-mpi.json")
    check(r.returncode == 0 and p and p["device_file"] == mpi and
          json.load(open(mpi))["async_progress"] is False,
          f"a 2-rank plan is priced on MPI's calibration ({r.stderr[-300:]!r})")
    r, p = opt("--world-size=2", "--launcher=torchrun")
    gloo = os.path.join(cache, "calibration-gloo.json")
    # Its ranks, on this one host, meet in shared memory and move data in
    # their waits, as MPI's do (runtime/comm/HostChannel.h).
    check(r.returncode == 0 and p and p["device_file"] == gloo and
          json.load(open(gloo))["async_progress"] is False,
          f"--launcher=torchrun prices it on Gloo's ({r.stderr[-300:]!r})")
    check(json.load(open(gloo))["intra_latency"] != json.load(open(mpi))["intra_latency"],
          "MPI's and Gloo's latencies are measured apart")

    # The built-in CPU measures nothing.
    shutil.rmtree(cache)
    r, p = opt("--device=cpu-generic")
    check(r.returncode == 0 and p and p["device"] == "cpu-generic" and
          not os.path.exists(cache), "--device=cpu-generic measures nothing")
    r, p = opt(env={"FSDP_DEVICE": "cpu-generic"})
    check(r.returncode == 0 and p and p["device"] == "cpu-generic",
          "FSDP_DEVICE sets the default device")
    r, p = opt("--device=cpu", env={"FSDP_DEVICE": "cpu-generic"})
    check(r.returncode == 0 and p and p["device"] != "cpu-generic",
          "--device wins over FSDP_DEVICE")


if __name__ == "__main__":
    sys.exit(main())
