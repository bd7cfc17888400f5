#!/usr/bin/env python3
"""Data parallelism over MPI: N ranks with batch B equal 1 rank with N*B.

The same model (weights from one export), the same global batches from one
.npz, 10 AdamW steps, world sizes 1, 2 and 4 (mpirun, oversubscribed on
this machine's cores): every step's loss and the final weights must agree
with the 1-rank run within 1e-5 relative L2. As in parity.py, elements
whose gradient is zero in exact arithmetic (attention key biases) are left
out of the weight comparison: AdamW turns float32 noise there into updates.
Also: a plan that differs between ranks is an error on every rank, and a
rank that dies makes the others exit non-zero within the comm timeout.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import load_generator, read_safetensors, rel  # noqa: E402

TOL = 1e-5
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    gen = load_generator(a.generator)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("gpt2", ["gpt2", "--loss"], {}),
                 ("llama-clip-accum", ["llama", "--loss"], {"grad-clip": 0.5, "grad-accum": 2})]
        for name, gen_args, opts in cases:
            flags = [f"--{k}={v}" for k, v in opts.items()]
            accum = opts.get("grad-accum", 1)
            global_batch = 4
            args = gen.parse_args(gen_args + ["--batch", str(global_batch * a.steps * accum)])
            _, data = gen.build(args)
            npz = os.path.join(tmp, name + ".npz")
            np.savez(npz, **{n: t.numpy() for n, t in data.items()})
            weights = None
            results = {}
            for world in (1, 2, 4):
                args = gen.parse_args(gen_args + ["--batch", str(global_batch // world)])
                model, inputs = gen.build(args)
                onnx_path = os.path.join(tmp, f"{name}-{world}.onnx")
                torch.onnx.export(model, tuple(inputs.values()), onnx_path,
                                  input_names=list(inputs), output_names=["loss"],
                                  opset_version=17, do_constant_folding=False)
                weights = weights or onnx_path  # every run starts from these
                plan = os.path.join(tmp, f"{name}-{world}.plan")
                subprocess.run([a.fsdp_opt, onnx_path, "-o", plan, f"--world-size={world}"] + flags,
                               check=True)
                log = os.path.join(tmp, f"{name}-{world}.jsonl")
                out = os.path.join(tmp, f"{name}-{world}.safetensors")
                grads = os.path.join(tmp, f"{name}-{world}.grads.safetensors")
                cmd = [a.fsdp_run, plan, "--weights", weights, "--data", npz, "--steps",
                       str(a.steps), "--log", log, "--save-full", out, "--dump-grads", grads,
                       "--quiet"]
                subprocess.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd, check=True)
                results[world] = ([json.loads(l)["loss"] for l in open(log)],
                                  read_safetensors(out), read_safetensors(grads))
            base_losses, base_w, base_g = results[1]
            largest = max(float(np.abs(g).max()) for g in base_g.values())
            for world in (2, 4):
                losses, w, _ = results[world]
                loss_err = rel(losses, base_losses)
                werr = 0.0
                for k, v in base_w.items():
                    keep = np.abs(base_g[k]) >= 1e-6 * largest if k in base_g else np.ones(v.shape, bool)
                    werr = max(werr, rel(w[k][keep], v[keep]) if keep.any() else 0.0)
                ok = loss_err <= TOL and werr <= TOL
                failures += not ok
                print(f"{'PASS' if ok else 'FAIL'} {name} world size {world} vs 1: losses "
                      f"{loss_err:.1e}, final weights {werr:.1e} (relative L2, tolerance {TOL})")

        # A plan that differs between ranks: an error on every rank, no hang.
        p1, p2 = (os.path.join(tmp, f"gpt2-{w}.plan") for w in (2, 4))
        r = subprocess.run(MPIRUN + ["-np", "2", "sh", "-c",
                                     f'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec {a.fsdp_run} {p1}; '
                                     f'else exec {a.fsdp_run} {p2}; fi'],
                           capture_output=True, text=True, timeout=60)
        msgs = r.stderr.count("the plan (")
        ok = r.returncode != 0 and msgs == 2
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} mismatched plans: exit {r.returncode}, "
              f"{msgs} of 2 ranks report it")

        # A rank that dies: the others exit non-zero, quickly.
        plan = os.path.join(tmp, "gpt2-2.plan")
        env = dict(os.environ, FSDP_FAULT_RANK="1", FSDP_FAULT_STEP="3")
        start = time.time()
        r = subprocess.run(MPIRUN + ["-np", "2", a.fsdp_run, plan, "--weights", weights,
                                     "--steps", "50", "--comm-timeout", "10", "--quiet"],
                           capture_output=True, text=True, env=env, timeout=120)
        took = time.time() - start
        ok = r.returncode != 0 and took < 30
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} a rank dies at step 3: the job exits {r.returncode} "
              f"after {took:.1f} s")
    total = 4 + 2
    print(f"data-parallel: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
