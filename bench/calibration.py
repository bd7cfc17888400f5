#!/usr/bin/env python3
"""The simulator against published FSDP runs: each configuration planned
the way that system ran it and priced as it ran (eager FSDP2), predicted
against published tokens/s/GPU.

Every point is torchtitan's FSDP2 (fully_shard per transformer block,
reshard after forward but the last, f32 gradient reduction, bf16 compute
and gathers with f32 master weights and AdamW, eager: compile = false),
planned with the shape generator (bench/make_shape_model.py: Llama shapes,
no weights) and priced with `--simulate-runtime=fsdp2-eager`:

  torchtitan docs/performance.md (pytorch/torchtitan at 1ea476e9f; 64
  A100 80GB, 8 a node): Llama 3 8B at T=8192, local batch 1, selective
  layer AC (2904) and selective op AC (2973); Llama 3 70B, full AC (331);
  Llama 2 13B at T=4096, local batch 2, no AC (2162), selective layer
  (1914) and selective op (1904); Llama 2 70B, selective op at local batch
  1 (355) and full at 2 (353).
  torchtitan benchmarks/llama3_h100_202412_torchtitan.md (Grand Teton: 8
  H100 a host, 96 GB HBM2e at 2.4 TB/s, 500 W power limit, 400 Gb/s per
  GPU): Llama 3.1 8B, local batch 2, selective AC, FSDP without
  torch.compile or Float8: 5762 on 8 GPUs, 5605 on 128 (T=8192, torchtitan's
  Llama 3 default then).

Left out: the same tables' torch.compile and Float8 rows (no pricing mode
models them), and runs of other systems (llm-foundry's MPT with ALiBi and
FSDP1, IBM fms-fsdp's HSDP) the shape generator cannot build yet.

Activation checkpointing as torchtitan applies it (parallelize_llama.py at
1ea476e9f): full = every block (`units`); selective op = the outputs of
matmuls and attention saved but every second matmul of a block recomputed
(`ops-alt`); selective layer = every second block, the 2nd, 4th, ...
(ac_freq 2).

The H100s are described as stated (h100-sxm's figures with HBM2e's 2.4
TB/s); the 500 W cap's effect on clocks is not modelled (no source gives
it).

    bench/calibration.py [--build build] [--json] [--only NAME,...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "calibration")
LAYERS = {"llama3-8b": 32, "llama3-70b": 80, "llama2-13b": 40, "llama2-70b": 80}
TT_PERF = "pytorch/torchtitan@1ea476e9f docs/performance.md"
TT_H100 = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"

# name: (source, model, T, local batch, GPUs, device, AC, published tok/s/GPU)
POINTS = {
    "l3-8b-a100-sel-layer": (TT_PERF, "llama3-8b", 8192, 1, 64, "a100-80g", "layer", 2904),
    "l3-8b-a100-sel-op": (TT_PERF, "llama3-8b", 8192, 1, 64, "a100-80g", "op", 2973),
    "l3-70b-a100-full": (TT_PERF, "llama3-70b", 8192, 1, 64, "a100-80g", "full", 331),
    "l2-13b-a100-none": (TT_PERF, "llama2-13b", 4096, 2, 64, "a100-80g", "none", 2162),
    "l2-13b-a100-sel-layer": (TT_PERF, "llama2-13b", 4096, 2, 64, "a100-80g", "layer", 1914),
    "l2-13b-a100-sel-op": (TT_PERF, "llama2-13b", 4096, 2, 64, "a100-80g", "op", 1904),
    "l2-70b-a100-sel-op": (TT_PERF, "llama2-70b", 4096, 1, 64, "a100-80g", "op", 355),
    "l2-70b-a100-full": (TT_PERF, "llama2-70b", 4096, 2, 64, "a100-80g", "full", 353),
    "l3.1-8b-h100x8-sel": (TT_H100, "llama3-8b", 8192, 2, 8, "h100-hbm2e", "op", 5762),
    "l3.1-8b-h100x128-sel": (TT_H100, "llama3-8b", 8192, 2, 128, "h100-hbm2e", "op", 5605),
}

# The Grand Teton H100s of TT_H100: h100-sxm's (costmodel/DeviceModel.cpp)
# with HBM2e's bandwidth as that page states it.
H100_HBM2E = {
    "name": "h100-hbm2e (Grand Teton, 2.4 TB/s)",
    "flops_bf16": 989e12, "flops_f32": 67e12, "mem_bandwidth": 2.4e12,
    "gemm_efficiency": 0.803, "attention_efficiency": 335.0 / 989.0,
    "memory_efficiency": 0.90, "intra_bandwidth": 360e9, "inter_bandwidth": 8 * 47e9,
    "intra_latency": 5e-6, "inter_latency": 15e-6, "launch_overhead": 4e-6,
    "devices_per_node": 8, "sms": 132, "collective_ctas": 24, "memory_bytes": 96_000_000_000,
}


def shape_model(model, T, batch):
    out = os.path.join(OUT, f"{model}-T{T}-B{batch}")
    path = os.path.join(out, model + ".onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_shape_model.py"),
                        out, "--model", model, "--seq", str(T), "--batch", str(batch)],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def ac_flag(model, ac):
    if ac == "none":
        return "--activation-checkpointing=none"
    if ac == "full":
        return "--activation-checkpointing=units"
    if ac == "op":  # torchtitan's: matmul and attention outputs kept, but
        return "--activation-checkpointing=ops-alt"  # every second matmul
    # selective layer, ac_freq 2: torchtitan counts its wrapped blocks from 1
    # and checkpoints those whose count is even: blocks 1, 3, 5, ...
    return "--activation-checkpointing=" + ",".join(
        f"layers.{i}" for i in range(1, LAYERS[model], 2))


def predict(opt, name, device_file):
    source, model, T, batch, gpus, device, ac, published = POINTS[name]
    plan = os.path.join(OUT, name + ".plan")
    last = LAYERS[model] - 1
    cmd = [opt, shape_model(model, T, batch), f"--world-size={gpus}",
           f"--device={device_file if device == 'h100-hbm2e' else device}",
           "--gpus-per-node=8", f"--batch-size={batch}", "--compute-dtype=bf16",
           "--param-dtype=bf16", "--loss=cross-entropy", "--grad-clip=1.0",
           "--forward-prefetch=true", "--backward-prefetch=pre", "--prefetch-depth=1",
           "--limit-all-gathers=2", "--reduce-dtype=f32", "--simulate-runtime=fsdp2-eager",
           f"--reshard-after-forward=default,layers.{last}=false", ac_flag(model, ac),
           "-o", plan]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"calibration.py: {name}: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    with open(plan) as f:
        p = json.load(f)["predicted"]
    return batch * T / p["step_seconds"], p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", action="store_true", help="a list of objects, for scripts")
    ap.add_argument("--only", default="", help="comma-separated point names")
    a = ap.parse_args()
    opt = os.path.join(a.build, "tools", "fsdp-opt")
    os.makedirs(OUT, exist_ok=True)
    device_file = os.path.join(OUT, "h100-hbm2e.json")
    with open(device_file, "w") as f:
        json.dump(H100_HBM2E, f)
    names = [n for n in POINTS if not a.only or n in a.only.split(",")]
    rows = []
    for name in names:
        source, model, T, batch, gpus, device, ac, published = POINTS[name]
        tok, p = predict(opt, name, device_file)
        rows.append(dict(source=source, name=name,
                         config=f"{model} T={T} local batch {batch}, {gpus} x {device}, "
                                f"AC {ac}, eager FSDP2",
                         published=published, predicted=round(tok, 1),
                         error=round(100 * (tok - published) / published, 1),
                         peak_gib=round(p["peak_bytes"] / 2**30, 1)))
        if not a.json:
            r = rows[-1]
            print(f"{name:<22} {r['config']:<62} {published:>6} {tok:>8.0f} {r['error']:>+7.1f}%",
                  flush=True)
    if a.json:
        print(json.dumps([{k: r[k] for k in ("source", "config", "published", "predicted")}
                          for r in rows], indent=1))
        return
    errors = [abs(r["error"]) for r in rows]
    print(f"mean |error| {statistics.mean(errors):.1f}%, median {statistics.median(errors):.1f}%, "
          f"largest {max(errors):.1f}% (goal: each within 15%, median within 8%)")


if __name__ == "__main__":
    main()
