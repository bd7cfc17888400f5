#!/usr/bin/env python3
"""What a preemption costs: GPT-2 124M on this machine's CPU.

A run with --checkpoint-dir is sent SIGTERM in the middle of a step (half a
step after a step's line reaches the log); reported: the time from the
signal to the process's exit (the step in progress finishes, every rank
saves, all exit with 143), the steps lost (the step the resumed run starts
at against the last step the interrupted run logged: 0 when the step in
progress was saved), and the checkpoint's size; then the median step with
--checkpoint-every 1, synchronous and --checkpoint-async, against none.

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
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--free-core", action="store_true",
                    help="one rank on half the cores (LOCAL_WORLD_SIZE=2 halves its "
                         "threads), the rest free for the writer, as on a GPU node")
    a = ap.parse_args()
    if a.free_core:
        a.world = 1
        os.environ["LOCAL_WORLD_SIZE"] = "2"
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
        modes = {"none": [], "sync": ["--checkpoint-every", "1", "--keep-last", "1"],
                 "async": ["--checkpoint-every", "1", "--keep-last", "1", "--checkpoint-async"]}
        for mode, flags in modes.items():
            shutil.rmtree(ck, ignore_errors=True)
            if os.path.exists(log):
                os.remove(log)
            extra = ["--checkpoint-dir", ck] + flags if flags else []
            p = subprocess.Popen(launch(a, [a.fsdp_run, plan, "--steps", str(a.steps),
                                            "--quiet", "--log", log] + extra),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # When each step's line reaches the log: the interval between
            # two lines is a whole step, the save after the first included.
            seen = []
            while p.poll() is None:
                n = len(logged(log))
                if n > len(seen):
                    seen += [time.time()] * (n - len(seen))
                time.sleep(0.005)
            if p.returncode != 0:
                raise SystemExit(f"{mode}: fsdp-run failed ({p.returncode})")
            gaps = [b - x for x, b in zip(seen[1:], seen[2:])]
            times[mode] = statistics.median(gaps)
        for mode in ("sync", "async"):
            more = times[mode] - times["none"]
            print(f"--checkpoint-every 1 ({mode}): step {times[mode]:.2f} s against "
                  f"{times['none']:.2f} s without ({100 * more / times['none']:+.0f}%)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
