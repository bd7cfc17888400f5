#!/usr/bin/env python3
"""Per-rank memory: the plan's prediction against the CPU backend's measure.

GPT-2 (default d=256, 4 layers, T=128, vocab 512, global batch 8) planned
for world sizes 1, 2 and 4 with full-shard (with and without activation
checkpointing, "+ac") and no-shard, run for 3 steps
under mpirun. For rank 0:
  predicted  = the plan's arena_bytes + its stored state (parameters or
               their shards, AdamW's two moments, constants), computed here
               from the plan file alone;
  arena hw   = the highest arena byte a step wrote (fsdp-run fills the
               arena with a pattern and scans it), against arena_bytes;
  rss        = the process's peak resident set (VmHWM), which adds the
               runtime's own baseline (libraries, MPI, kernel scratch).

    bench/memory.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import importlib.util
import json
import os
import subprocess
import tempfile

import torch

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def predicted_state(plan):
    """Bytes of parameters (or shards), AdamW moments and constants."""
    adam = plan["train"].get("optimizer", "adamw") == "adamw"
    total = 0
    for p in plan["params"]:
        if "flat" in p:
            continue
        n = 1
        for d in p["shape"]:
            n *= d
        total += 4 * n * (1 + (2 if adam and p.get("trainable") else 0))
    for f in plan.get("flats", []):
        total += 4 * f["shard_numel"] * (1 + (2 if adam and f["trainable"] else 0))
    for c in plan["constants"]:
        n = 1
        for d in c["shape"]:
            n *= d
        total += n * {"f32": 4, "i64": 8, "i1": 1}[c["dtype"]]
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("gen_model", a.generator)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    base = ["gpt2", "--loss", "--dim", str(a.dim), "--layers", str(a.layers), "--seq",
            str(a.seq), "--vocab", str(a.vocab), "--dynamic-batch"]
    mib = 1 / 2**20
    print(f"GPT-2 d={a.dim} L={a.layers} T={a.seq} vocab={a.vocab}, global batch {a.batch}; "
          f"rank 0, MiB")
    print(f"{'world':>5} {'strategy':>13} {'arena plan':>10} {'arena hw':>9} {'hw/plan':>7} "
          f"{'state':>7} {'predicted':>9} {'rss':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        subprocess.run(["/usr/bin/python3", a.generator] + base + ["-o", onnx], check=True)
        for world in (1, 2, 4):
            for strategy in ("full-shard", "full-shard+ac", "no-shard"):
                plan_path = os.path.join(tmp, f"{world}-{strategy}.plan")
                extra = ["--activation-checkpointing=units"] if strategy.endswith("+ac") else []
                subprocess.run([a.fsdp_opt, onnx, "-o", plan_path, f"--world-size={world}",
                                f"--strategy={strategy.split('+')[0]}",
                                f"--batch-size={a.batch // world}"] + extra,
                               check=True, stderr=subprocess.DEVNULL)
                plan = json.load(open(plan_path))
                log = os.path.join(tmp, f"{world}-{strategy}.jsonl")
                cmd = [a.fsdp_run, plan_path, "--steps", "3", "--log", log, "--quiet"]
                subprocess.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd,
                               check=True)
                last = [json.loads(l) for l in open(log)][-1]
                state = predicted_state(plan)
                predicted = plan["arena_bytes"] + state
                print(f"{world:>5} {strategy:>13} {plan['arena_bytes'] * mib:>10.2f} "
                      f"{last['arena_high_water'] * mib:>9.2f} "
                      f"{last['arena_high_water'] / plan['arena_bytes']:>7.3f} "
                      f"{state * mib:>7.2f} {predicted * mib:>9.2f} "
                      f"{last['rss_peak_bytes'] * mib:>7.1f}")


if __name__ == "__main__":
    main()
