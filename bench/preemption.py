#!/usr/bin/env python3
"""What a preemption costs: GPT-2 124M on this machine's CPU.

A run with --checkpoint-dir is sent SIGTERM in the middle of a step (half a
step after a step's line reaches the log); reported: the time from the
signal to the process's exit (the step in progress finishes, every rank
saves, all exit with 143), the steps lost (the step the resumed run starts
at against the last step the interrupted run logged: 0 when the step in
progress was saved), and the checkpoint's size; then the cost per step of
--checkpoint-every 1 against no checkpoints.

  /usr/bin/python3 bench/preemption.py [--world 2]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def launch(a, cmd):
    return (MPIRUN + ["-np", str(a.world)] if a.world > 1 else []) + cmd


def logged(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fsdp-preempt-bench-")
    try:
        onnx, plan = os.path.join(tmp, "gpt2.onnx"), os.path.join(tmp, "gpt2.plan")
        subprocess.run(["/usr/bin/python3", a.generator, "gpt2", "-o", onnx, "--loss",
                        "--layers", "12", "--dim", "768", "--heads", "12", "--seq", str(a.seq),
                        "--vocab", "50304", "--batch", str(a.batch), "--external-data"],
                       check=True, capture_output=True)
        subprocess.run([a.fsdp_opt, onnx, "-o", plan, f"--world-size={a.world}"], check=True,
                       capture_output=True)
        ck, log = os.path.join(tmp, "ck"), os.path.join(tmp, "log.jsonl")
        cmd = [a.fsdp_run, plan, "--steps", "1000", "--quiet", "--checkpoint-dir", ck,
               "--resume=auto", "--log", log]
        proc = subprocess.Popen(launch(a, cmd), stderr=subprocess.PIPE, text=True)
        while len(logged(log)) < 2 and proc.poll() is None:
            time.sleep(0.01)
        rows = logged(log)
        step_s = rows[-1]["step_ms"] / 1000
        time.sleep(step_s / 2)  # mid-step
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        ranks = []
        for p in pids:
            try:
                if open(f"/proc/{p}/comm").read().strip() == "fsdp-run" and \
                        ck.encode() in open(f"/proc/{p}/cmdline", "rb").read():
                    ranks.append(int(p))
            except OSError:
                pass
        sent = time.time()
        for p in ranks:
            os.kill(p, signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
        to_exit = time.time() - sent
        last = max(r["step"] for r in logged(log))
        saved = int(open(os.path.join(ck, "latest")).read().strip().split("-")[1])
        size = sum(os.path.getsize(os.path.join(dp, f))
                   for dp, _, fs in os.walk(os.path.join(ck, f"step-{saved}")) for f in fs)
        print(f"GPT-2 124M, {a.world} rank(s), batch {a.batch} x {a.seq}, step {step_s:.2f} s")
        print(f"SIGTERM mid-step -> exit {proc.returncode} in {to_exit:.2f} s; "
              f"last logged step {last}, checkpoint step-{saved}: "
              f"{last - saved} step(s) lost; checkpoint {size / 2**20:.0f} MiB")
        # The cost of saving every step.
        times = {}
        for every in (0, 1):
            shutil.rmtree(ck, ignore_errors=True)
            os.remove(log)
            extra = ["--checkpoint-dir", ck, "--checkpoint-every", "1", "--keep-last", "1"] \
                if every else []
            start = time.time()
            subprocess.run(launch(a, [a.fsdp_run, plan, "--steps", str(a.steps), "--quiet",
                                      "--log", log] + extra), check=True, capture_output=True)
            wall = time.time() - start
            times[every] = wall
        per = (times[1] - times[0]) / a.steps
        print(f"--checkpoint-every 1: {per:.2f} s a step more ({100 * per / step_s:.0f}% of "
              f"a {step_s:.2f} s step; synchronous saves)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
