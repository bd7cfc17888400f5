#!/usr/bin/env python3
"""Checkpoints survive a crash at any point, and resuming is exact.

1. Train a small GPT-2 6 steps straight through; train 3 steps with a
   checkpoint, resume to 6: the final weights must be bitwise identical.
2. Die in the middle of writing the step-3 checkpoint (test hook): the
   directory still resumes from step 2, and resuming to step 6 gives the
   same weights as 6 steps straight.
3. Sharded checkpoints: 4 ranks (full-shard) save at step 3, each rank its
   shard file, rank 0 the manifest; resume on 2 (shard-grad-op) and on 1
   (no-shard) to step 6 on the same global batches: the final weights equal
   6 steps on 1 rank within 1e-5 (float32 reassociation of the reductions,
   as in dp_parity.py). Two ranks dying mid-save leave step 2 resumable.
4. Repeatedly SIGKILL a run that checkpoints every step at a random moment
   (often in the middle of writing a checkpoint), then resume from the
   directory: it must load the last complete checkpoint and finish.
"""
import argparse
import os
import random
import signal
import subprocess
import bounded  # subprocess.run with a deadline
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import load_generator, read_safetensors, rel  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
RESULTS = []


def report(ok, message):
    RESULTS.append(bool(ok))
    print(f"{'PASS' if ok else 'FAIL'} {message}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--kills", type=int, default=6)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        plan = os.path.join(tmp, "gpt2.plan")
        bounded.run(["/usr/bin/python3", a.generator, "gpt2", "-o", onnx, "--loss",
                        "--layers", "2", "--dim", "64", "--seq", "32", "--vocab", "128",
                        "--batch", "8"], check=True)
        bounded.run([a.fsdp_opt, onnx, "-o", plan], check=True)
        run = [a.fsdp_run, plan, "--quiet"]

        straight = os.path.join(tmp, "straight.safetensors")
        resumed = os.path.join(tmp, "resumed.safetensors")
        ck = os.path.join(tmp, "ck")
        bounded.run(run + ["--steps", "6", "--save-full", straight], check=True)
        bounded.run(run + ["--steps", "3", "--checkpoint-dir", ck], check=True)
        bounded.run(run + ["--steps", "6", "--resume", ck, "--save-full", resumed],
                       check=True)
        same = open(straight, "rb").read() == open(resumed, "rb").read()
        report(same, "resume at step 3 to step 6 equals 6 steps straight (bitwise)")

        mid = os.path.join(tmp, "mid")
        r = bounded.run(run + ["--steps", "6", "--checkpoint-dir", mid, "--checkpoint-every", "1"],
                           env=dict(os.environ, FSDP_FAULT_IN_SAVE="3"))
        latest = open(os.path.join(mid, "latest")).read().strip()
        partial = os.path.isdir(os.path.join(mid, "step-3.tmp"))
        resumed_mid = os.path.join(tmp, "resumed-mid.safetensors")
        r2 = bounded.run(run + ["--steps", "6", "--resume", mid, "--save-full", resumed_mid])
        same = r2.returncode == 0 and open(straight, "rb").read() == open(resumed_mid, "rb").read()
        ok = r.returncode != 0 and latest == "step-2" and partial and same
        report(ok, f"crash while saving step 3: latest = {latest}, "
              f"partial step-3.tmp left = {partial}, resumed run equals straight = {same}")

        reshard(a, tmp)

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
            check = bounded.run(run + ["--steps", str(step + 1)] +
                                   (["--resume", kdir] if latest else []),
                                   capture_output=True, text=True)
            ok = check.returncode == 0
            leftovers = [d for d in os.listdir(kdir) if d.endswith(".tmp")] if os.path.isdir(kdir) else []
            report(ok, f"kill {i + 1}: resumed from {latest or 'nothing'}"
                  f"{' (a partial ' + leftovers[0] + ' was left and ignored)' if leftovers else ''}")
            if not ok:
                print("   ", check.stderr.strip())
    failures = RESULTS.count(False)
    print(f"checkpoint: {len(RESULTS) - failures} passed, {failures} failed")
    return 1 if failures else 0


def reshard(a, tmp):
    """Save under one world size and strategy, resume under others."""
    gen = load_generator(a.generator)
    global_batch, steps = 8, 6
    base = ["gpt2", "--loss", "--layers", "2", "--dim", "32", "--seq", "16", "--vocab", "97"]
    _, data = gen.build(gen.parse_args(base + ["--batch", str(global_batch * steps)]))
    npz = os.path.join(tmp, "reshard.npz")
    np.savez(npz, **{n: t.numpy() for n, t in data.items()})
    onnx = os.path.join(tmp, "reshard.onnx")
    bounded.run(["/usr/bin/python3", a.generator] + base +
                   ["--dynamic-batch", "-o", onnx], check=True)

    def plan(world, strategy):
        path = os.path.join(tmp, f"reshard-{world}-{strategy}.plan")
        bounded.run([a.fsdp_opt, onnx, "-o", path, f"--world-size={world}",
                        f"--strategy={strategy}", f"--batch-size={global_batch // world}"],
                       check=True, stderr=subprocess.DEVNULL)
        return path

    def run(world, strategy, extra):
        cmd = [a.fsdp_run, plan(world, strategy), "--data", npz, "--quiet"] + extra
        bounded.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd, check=True)

    straight = os.path.join(tmp, "reshard-straight.safetensors")
    grads = os.path.join(tmp, "reshard-grads.safetensors")
    run(1, "no-shard", ["--steps", str(steps), "--save-full", straight, "--dump-grads", grads])
    # As in dp_parity.py: elements whose gradient is zero in exact
    # arithmetic (attention key biases) are left out, AdamW turns float32
    # noise there into updates.
    g = read_safetensors(grads)
    largest = max(float(np.abs(v).max()) for v in g.values())
    keep = {k: np.abs(v) >= 1e-6 * largest for k, v in g.items()}
    ck = os.path.join(tmp, "reshard-ck")
    run(4, "full-shard", ["--steps", "3", "--checkpoint-dir", ck])
    want = read_safetensors(straight)
    # Every rank wrote its shard; rank 0 the manifest.
    files = sorted(os.listdir(os.path.join(ck, "step-3")))
    ok = files == ["manifest.json"] + [f"rank-{r:05d}.safetensors" for r in range(4)]
    report(ok, f"a 4-rank checkpoint holds {', '.join(files)}")
    for world, strategy in ((2, "shard-grad-op"), (1, "no-shard")):
        out = os.path.join(tmp, f"reshard-{world}.safetensors")
        run(world, strategy, ["--steps", str(steps), "--resume", ck, "--save-full", out])
        got = read_safetensors(out)
        err = max(rel(got[k][keep[k]], v[keep[k]]) if k in keep else rel(got[k], v)
                  for k, v in want.items())
        good = err <= 1e-5
        ok &= good
        report(good, f"saved on 4 ranks (full-shard) at step 3, resumed on "
              f"{world} ({strategy}) to step {steps}: weights {err:.1e} from 1 rank straight "
              f"(relative L2, tolerance 1e-5)")

    # Two ranks die in the middle of saving step 3 (after writing their
    # shards, before the manifest): step 2 stays the latest and resumes to
    # the same weights as running straight through on two ranks.
    mid = os.path.join(tmp, "reshard-mid")
    straight2 = os.path.join(tmp, "reshard-straight2.safetensors")
    run(2, "full-shard", ["--steps", str(steps), "--save-full", straight2])
    env = dict(os.environ, FSDP_FAULT_IN_SAVE="3")
    r = bounded.run(MPIRUN + ["-np", "2", a.fsdp_run, plan(2, "full-shard"), "--data", npz,
                                 "--quiet", "--steps", str(steps), "--checkpoint-dir", mid,
                                 "--checkpoint-every", "1"], env=env, capture_output=True)
    latest = open(os.path.join(mid, "latest")).read().strip()
    resumed = os.path.join(tmp, "reshard-mid.safetensors")
    run(2, "full-shard", ["--steps", str(steps), "--resume", mid, "--save-full", resumed])
    same = open(straight2, "rb").read() == open(resumed, "rb").read()
    good = r.returncode != 0 and latest == "step-2" and same
    ok &= good
    report(good, f"2 ranks die while saving step 3: latest = {latest}, "
          f"resumed equals straight (bitwise) = {same}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
