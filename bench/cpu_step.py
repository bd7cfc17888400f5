#!/usr/bin/env python3
"""CPU training-step time: fsdp-run against PyTorch 1.13 eager, side by side.

The same GPT-2 (default d=256, 4 layers, 4 heads, T=128, vocab 512, batch
8, tied embeddings, loss in the graph), the same batch, AdamW, the same
thread count (OpenBLAS and torch both pinned to --threads). Reports the
median step time of each over --steps steps after --warmup, and the ratio.

    bench/cpu_step.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    spec = importlib.util.spec_from_file_location("gen_model", a.generator)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    args = gen.parse_args(["gpt2", "--loss", "--dim", str(a.dim), "--layers", str(a.layers),
                           "--heads", str(a.heads), "--seq", str(a.seq), "--vocab",
                           str(a.vocab), "--batch", str(a.batch)])
    model, inputs = gen.build(args)
    total = a.steps + a.warmup
    tokens = a.batch * a.seq
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        torch.onnx.export(model, tuple(inputs.values()), onnx, input_names=list(inputs),
                          output_names=["loss"], opset_version=17, do_constant_folding=False)
        npz = os.path.join(tmp, "batch.npz")
        np.savez(npz, **{n: t.numpy() for n, t in inputs.items()})
        plan = os.path.join(tmp, "gpt2.plan")
        subprocess.run([a.fsdp_opt, onnx, "-o", plan], check=True)
        log = os.path.join(tmp, "log.jsonl")
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
        subprocess.run([a.fsdp_run, plan, "--data", npz, "--steps", str(total), "--log", log,
                        "--quiet"], check=True, env=env)
        ours = [json.loads(l)["step_ms"] for l in open(log)][a.warmup:]

    torch.set_num_threads(a.threads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for s in range(total):
        start = time.perf_counter()
        opt.zero_grad()
        loss = model(*inputs.values())
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1000)
    theirs = times[a.warmup:]
    mo, mt = statistics.median(ours), statistics.median(theirs)
    params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2 d={a.dim} L={a.layers} T={a.seq} B={a.batch} vocab={a.vocab} "
          f"({params / 1e6:.2f} M params), {a.threads} threads, median of {a.steps} steps:")
    print(f"  fsdp-run        {mo:8.1f} ms/step  {tokens / mo * 1000:8.0f} tokens/s")
    print(f"  PyTorch eager   {mt:8.1f} ms/step  {tokens / mt * 1000:8.0f} tokens/s")
    print(f"  ratio fsdp/torch step time: {mo / mt:.2f} (target <= 1.0)")


if __name__ == "__main__":
    main()
