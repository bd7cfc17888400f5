#!/usr/bin/env python3
"""Checkpoints survive a crash at any point, and resuming is exact.

1. Train a small GPT-2 6 steps straight through; train 3 steps with a
   checkpoint, resume to 6: the final weights must be bitwise identical.
2. Die in the middle of writing the step-3 checkpoint (test hook): the
   directory still resumes from step 2, and resuming to step 6 gives the
   same weights as 6 steps straight.
3. Repeatedly SIGKILL a run that checkpoints every step at a random moment
   (often in the middle of writing a checkpoint), then resume from the
   directory: it must load the last complete checkpoint and finish.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--kills", type=int, default=6)
    a = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        plan = os.path.join(tmp, "gpt2.plan")
        subprocess.run(["/usr/bin/python3", a.generator, "gpt2", "-o", onnx, "--loss",
                        "--layers", "2", "--dim", "64", "--seq", "32", "--vocab", "128",
                        "--batch", "8"], check=True)
        subprocess.run([a.fsdp_opt, onnx, "-o", plan], check=True)
        run = [a.fsdp_run, plan, "--quiet"]

        straight = os.path.join(tmp, "straight.safetensors")
        resumed = os.path.join(tmp, "resumed.safetensors")
        ck = os.path.join(tmp, "ck")
        subprocess.run(run + ["--steps", "6", "--save-full", straight], check=True)
        subprocess.run(run + ["--steps", "3", "--checkpoint-dir", ck], check=True)
        subprocess.run(run + ["--steps", "6", "--resume", ck, "--save-full", resumed],
                       check=True)
        same = open(straight, "rb").read() == open(resumed, "rb").read()
        print(("PASS" if same else "FAIL") + " resume at step 3 to step 6 equals 6 steps straight (bitwise)")
        failures += not same

        mid = os.path.join(tmp, "mid")
        r = subprocess.run(run + ["--steps", "6", "--checkpoint-dir", mid, "--checkpoint-every", "1"],
                           env=dict(os.environ, FSDP_FAULT_IN_SAVE="3"))
        latest = open(os.path.join(mid, "latest")).read().strip()
        partial = os.path.isdir(os.path.join(mid, "step-3.tmp"))
        resumed_mid = os.path.join(tmp, "resumed-mid.safetensors")
        r2 = subprocess.run(run + ["--steps", "6", "--resume", mid, "--save-full", resumed_mid])
        same = r2.returncode == 0 and open(straight, "rb").read() == open(resumed_mid, "rb").read()
        ok = r.returncode != 0 and latest == "step-2" and partial and same
        print(f"{'PASS' if ok else 'FAIL'} crash while saving step 3: latest = {latest}, "
              f"partial step-3.tmp left = {partial}, resumed run equals straight = {same}")
        failures += not ok

        rng = random.Random(1)
        kdir = os.path.join(tmp, "killed")
        total = 400
        for i in range(a.kills):
            p = subprocess.Popen(run + ["--steps", str(total), "--checkpoint-dir", kdir,
                                        "--checkpoint-every", "1"] +
                                 (["--resume", kdir] if os.path.exists(os.path.join(kdir, "latest")) else []))
            time.sleep(rng.uniform(0.3, 1.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
            latest = open(os.path.join(kdir, "latest")).read().strip() if os.path.exists(
                os.path.join(kdir, "latest")) else None
            # Resuming must work from whatever the kill left behind.
            step = int(latest.split("-")[1]) if latest else 0
            check = subprocess.run(run + ["--steps", str(step + 1)] +
                                   (["--resume", kdir] if latest else []),
                                   capture_output=True, text=True)
            ok = check.returncode == 0
            leftovers = [d for d in os.listdir(kdir) if d.endswith(".tmp")] if os.path.isdir(kdir) else []
            print(f"{'PASS' if ok else 'FAIL'} kill {i + 1}: resumed from {latest or 'nothing'}"
                  f"{' (a partial ' + leftovers[0] + ' was left and ignored)' if leftovers else ''}")
            if not ok:
                print("   ", check.stderr.strip())
            failures += not ok
    print(f"checkpoint: {2 + a.kills - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
