#!/usr/bin/env python3
"""Predicted against measured with no --device: fsdp-opt's default
--device=cpu, this machine as fsdp-run calibrates it on first use (in an
empty cache, so the first-use measurement and fit are part of the run and
timed), for

  - the demo's GPT-2 (d=64, 4 layers, T=32, vocabulary 256, global batch 8;
    `make demo`) on 1 rank, on 2 under mpirun and on 2 under torchrun
    (Gloo, --launcher=torchrun);
  - bench/cpu_step.py's GPT-2 (d=256, 4 layers, T=128, vocabulary 512,
    global batch 8) on 1 rank in f32 and in bf16, and on 2 under mpirun
    and torchrun.

Each case is compiled once and run --rounds times (--steps steps each,
the median step of each run), the rounds taken in turn over all the cases
so that the machine's drift spreads over them; the table gives each run's
time and the error of their median. Target: within 10%. Five rounds by
default: on the project's 2-core VM one process's step moved 10-20% from
one run to the next (a neighbour sharing the cores), and the median of 3
still moved by several points.

    bench/out_of_the_box.py [--build build] [--rounds 5] [--steps 12]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2"]
TORCHRUN = ["/usr/bin/python3", os.path.join(ROOT, "scripts", "torchrun.py"),
            "--nproc_per_node", "2", "--master_port", "29731", "--no_python"]

MODELS = {
    "demo": ["--dim", "64", "--layers", "4", "--heads", "4", "--seq", "32", "--vocab", "256"],
    "cpu_step": ["--dim", "256", "--layers", "4", "--heads", "4", "--seq", "128",
                 "--vocab", "512"],
}
CASES = [  # model, launcher (None: one process), extra fsdp-opt flags
    ("demo", None, []), ("demo", "mpirun", []), ("demo", "torchrun", []),
    ("cpu_step", None, []), ("cpu_step", None, ["--compute-dtype=bf16"]),
    ("cpu_step", "mpirun", []), ("cpu_step", "torchrun", []),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--cache", help="calibration cache directory (default: a fresh one)")
    a = ap.parse_args()
    tools = os.path.join(a.build, "tools")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "FSDP_DEVICE"}
        env["FSDP_CACHE_DIR"] = a.cache or os.path.join(tmp, "cache")
        j = lambda name: os.path.join(tmp, name)
        for name, args in MODELS.items():
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"),
                            "gpt2", "--loss", "--dynamic-batch", "-o", j(name + ".onnx")] + args,
                           check=True, stdout=subprocess.DEVNULL)
            seq = args[args.index("--seq") + 1]
            vocab = args[args.index("--vocab") + 1]
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "make_dataset.py"),
                            j(name + ".npz"), "--rows", "64", "--seq", seq, "--vocab", vocab],
                           check=True, stdout=subprocess.DEVNULL)
        print(f"{'model':<9} {'ranks':<14} {'dtype':<5} {'pred ms':>8} "
              f"{'measured ms (each run)':>24} {'median err':>10}")
        errors = []
        # Every case compiled first (the first use of an engine measures and
        # fits it), then the rounds in turn over all the cases: the machine's
        # speed drifts over minutes (20-45% on the project's 2-core VM), and
        # a case's runs back to back would all land in one state of it.
        plans = []

        def compile_case(model, launcher, flags, plan):
            world = 1 if launcher is None else 2
            opt = [os.path.join(tools, "fsdp-opt"), j(model + ".onnx"),
                   f"--batch-size={8 // world}", f"--world-size={world}", "-o", plan] + flags
            if launcher == "torchrun":
                opt.append("--launcher=torchrun")
            r = subprocess.run(opt, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(r.stderr)
            return r

        for model, launcher, flags in CASES:
            plan = j(f"{model}-{launcher}-{len(flags)}.plan")
            start = time.time()
            r = compile_case(model, launcher, flags, plan)
            if "measuring" in r.stderr:
                engine = {None: "none", "mpirun": "mpi", "torchrun": "gloo"}[launcher]
                cal = json.load(open(os.path.join(env["FSDP_CACHE_DIR"],
                                                  f"calibration-{engine}.json")))
                print(f"  (first use for {launcher or 'one process'}: measured and fitted in "
                      f"{time.time() - start:.1f} s; the machine's speed moved "
                      f"{100 * cal.get('speed_drift', float('nan')):.0f}% meanwhile)")
            plans.append(plan)
        measured = [[] for _ in CASES]
        for _ in range(a.rounds):
            for i, (model, launcher, flags) in enumerate(CASES):
                trace = j("trace.json")
                run = [os.path.join(tools, "fsdp-run"), plans[i], "--data", j(model + ".npz"),
                       "--steps", str(a.steps), "--trace", trace, "--quiet"]
                prefix = {None: [], "mpirun": MPIRUN, "torchrun": TORCHRUN}[launcher]
                subprocess.run(prefix + run, env=env, check=True, capture_output=True)
                measured[i].append(json.load(open(trace))["otherData"]["step_seconds"] * 1e3)
        for i, (model, launcher, flags) in enumerate(CASES):
            predicted = json.load(open(plans[i]))["predicted"]["step_seconds"] * 1e3
            m = statistics.median(measured[i])
            err = 100 * (predicted - m) / m
            errors.append(abs(err))
            ranks = "1" if launcher is None else f"2 ({launcher})"
            dtype = "bf16" if flags else "f32"
            each = ", ".join(f"{x:.1f}" for x in measured[i])
            print(f"{model:<9} {ranks:<14} {dtype:<5} {predicted:>8.2f} {each:>24} {err:>+9.1f}%",
                  flush=True)
        # The same cases compiled again: the runs above (4 steps or more,
        # priced on these calibrations) recorded their steps, whose median
        # now corrects each engine's calibration (step_correction). In
        # sample (the correction comes from these runs): it shows what the
        # next compile on this machine would predict, not a held-out error.
        print("\nrecompiled after the runs (each engine's calibration corrected by the steps "
              "they recorded; in sample):")
        for i, (model, launcher, flags) in enumerate(CASES):
            again = j(f"healed-{i}.plan")
            compile_case(model, launcher, flags, again)
            p = json.load(open(again))["predicted"]
            m = statistics.median(measured[i])
            print(f"{model:<9} {launcher or '1':<14} x{p.get('step_correction', 1.0):.3f} "
                  f"{p['step_seconds'] * 1e3:8.2f} ms against {m:.2f}: "
                  f"{100 * (p['step_seconds'] * 1e3 - m) / m:+.1f}%")
        ok = max(errors) <= 10
        print(f"largest |error| {max(errors):.1f}%, median {statistics.median(errors):.1f}% "
              f"(target: each within 10%: {'met' if ok else 'MISSED'})")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
