#!/usr/bin/env python3
"""The same plan under mpirun (OpenMPI) and under torchrun (Gloo), side by side.

For world sizes 2 and 4 on this machine: a GPT-2 (default d=256, 4 layers,
T=128, vocab 512, global batch 8, full-shard, one unit per block) planned
once per world size and trained from the same weights under each launcher;
the median step time after --warmup steps (the losses must agree: the same
plan on two engines is the same arithmetic up to reassociation), and the
collective engine's own figures from `fsdp-run --calibrate` under the same
launcher: a 4-byte all-reduce's latency per ring step and a 16 MB
all-reduce's bus bandwidth (2(p-1)/p of the bytes over the time).

    bench/comm_engines.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run

torchrun is Debian's torch.distributed.run through scripts/torchrun.py
(static rendezvous: the agent's store). Ranks share this machine's cores;
fsdp-run gives each rank cores / ranks threads under both launchers.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
TORCHRUN = ["/usr/bin/python3", os.path.join(ROOT, "scripts", "torchrun.py")]


def launch(engine, world, cmd, port):
    if engine == "mpirun":
        argv = MPIRUN + ["-np", str(world)] + cmd
    else:
        argv = TORCHRUN + ["--nproc_per_node", str(world), "--master_addr", "127.0.0.1",
                           "--master_port", str(port), "--no_python"] + cmd
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{engine} -np {world} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8, help="global batch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--worlds", default="2,4")
    a = ap.parse_args()

    spec = importlib.util.spec_from_file_location("gen_model", a.generator)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    port = 31800 + os.getpid() % 1000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        weights = None
        for world in [int(w) for w in a.worlds.split(",")]:
            args = gen.parse_args(["gpt2", "--loss", "--dim", str(a.dim), "--layers",
                                   str(a.layers), "--heads", "4", "--seq", str(a.seq),
                                   "--vocab", str(a.vocab), "--batch", str(a.batch // world)])
            model, inputs = gen.build(args)
            onnx = os.path.join(tmp, f"gpt2-{world}.onnx")
            torch.onnx.export(model, tuple(inputs.values()), onnx, input_names=list(inputs),
                              output_names=["loss"], opset_version=17,
                              do_constant_folding=False)
            weights = weights or onnx
            plan = os.path.join(tmp, f"gpt2-{world}.plan")
            subprocess.run([a.fsdp_opt, onnx, "-o", plan, f"--world-size={world}"], check=True,
                           stderr=subprocess.DEVNULL)
            losses = {}
            for engine in ("mpirun", "torchrun"):
                port += 2
                log = os.path.join(tmp, f"{engine}-{world}.jsonl")
                launch(engine, world, [a.fsdp_run, plan, "--weights", weights, "--steps",
                                       str(a.steps + a.warmup), "--log", log, "--quiet"], port)
                records = [json.loads(l) for l in open(log)]
                losses[engine] = [r["loss"] for r in records]
                step = statistics.median(r["step_ms"] for r in records[a.warmup:])
                port += 2
                cal = json.loads(launch(engine, world, [a.fsdp_run, "--calibrate"], port))
                rows.append((world, engine, step, cal["intra_latency"] * 1e6,
                             cal["intra_bandwidth"] / 1e9))
            diff = max(abs(x - y) / max(abs(y), 1e-12)
                       for x, y in zip(losses["torchrun"], losses["mpirun"]))
            if diff > 1e-5:
                sys.exit(f"world {world}: the losses differ between engines by {diff:.1e}")
            rows.append((world, "losses agree", diff, None, None))

    params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2 d={a.dim} L={a.layers} T={a.seq} global batch {a.batch} vocab={a.vocab} "
          f"({params / 1e6:.2f} M params), full-shard, {os.cpu_count()} cores, "
          f"median of {a.steps} steps")
    print("| ranks | engine | step (ms) | all-reduce latency per step (us) | "
          "all-reduce bus bandwidth (GB/s) |")
    print("|---|---|---|---|---|")
    for world, engine, step, lat, bw in rows:
        if lat is None:
            print(f"| {world} | (losses agree to {step:.1e} relative) | | | |")
        else:
            print(f"| {world} | {engine} ({'OpenMPI' if engine == 'mpirun' else 'Gloo'}) | "
                  f"{step:.1f} | {lat:.1f} | {bw:.2f} |")


if __name__ == "__main__":
    main()
