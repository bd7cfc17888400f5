#!/usr/bin/env python3
"""Offload planned ahead against FSDP2's CPU offload, in the simulator.

Plans, on the calibrated device models (costmodel/DeviceModel.cpp: host
links, host cores and memory, host AdamW rates), full-shard with bf16
compute and gathers, f32 master weights and AdamW, micro-batch 1,
gradients clipped to norm 1:

  70B     Llama-3-70B, T=8192, one node of 8 H100-80GB
          none        no offload (does not fit: its peak is shown)
          optimizer   --offload=optimizer, --autotune under 80 GB
          all         --offload=all, --autotune under 80 GB
          auto        --offload=auto --autotune (the least offload that fits)
          FSDP2       FSDP2's CPUOffloadPolicy, priced as FSDP2 runs it
                      (--offload=all --simulate-runtime=fsdp2-eager: the
                      f32 shard copied before every gather and cast on the
                      device, PyTorch's CPU AdamW after backward), with the
                      FSDP2 schedule of bench/scale.py (a unit per block,
                      the last block kept gathered), three ways: PyTorch's
                      default CPU AdamW (the for-loop) with every block
                      checkpointed; fused=True (torchtitan's default); and
                      fused with the activation checkpointing (every block,
                      selective op, every second block, none) that runs
                      fastest in 80 GB, the freedom fsdp's plans have. The
                      headline is against the last.
  8B      Llama-3-8B, T=8192, one H100-80GB: --offload=auto --autotune
  L2-70B  Llama-2-70B, T=4096, 8 A100-80GB (a widely shared guide's
          "~800-900 tokens/s" with FULL_SHARD and bf16): everything on the
          device with every block checkpointed, and --offload=auto

and prints each plan's peak device and host memory per GPU, step,
tokens/s/GPU, and the busy time of each resource (device compute, the
host link's copies, host work), naming the busiest; then the gain of
fsdp's --offload=all plan over the fused, AC-free FSDP2 baseline split
into its parts: the update where FSDP2 runs it (--offload-update=
after-backward, FSDP2's schedule and AC, priced as fsdp-run runs it: the
runtime's copies and casts), the update moved before the next use of the
shard (overlapping the forward), then --autotune's schedule and
checkpointing. Each host-side rate is printed with its source, and
marked ASSUMED where no measurement of that hardware backs it. --json
prints the rows.

    /usr/bin/python3 bench/offload.py [--build build]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import FSDP2, FSDP2_SCHEDULE, shape_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "offload")
COMMON = ["--compute-dtype=bf16", "--param-dtype=bf16", "--batch-size=1",
          "--loss=cross-entropy", "--gpus-per-node=8", "--grad-clip=1.0"]
A100 = ["--device=a100-80g"]
CASES = [
    # name, model, T, world, flags (the device: --device=h100-sxm unless named)
    ("70B none", "llama3-70b", 8192, 8, ["--activation-checkpointing=units"]),
    ("70B optimizer", "llama3-70b", 8192, 8, ["--offload=optimizer", "--autotune"]),
    ("70B all", "llama3-70b", 8192, 8, ["--offload=all", "--autotune"]),
    ("70B auto", "llama3-70b", 8192, 8, ["--offload=auto", "--autotune"]),
    ("8B auto, 1 GPU", "llama3-8b", 8192, 1, ["--offload=auto", "--autotune"]),
    # A widely shared FSDP guide's claim, "~800-900 tokens/s" for Llama-2-70B
    # with FULL_SHARD and bf16 on 8 A100-80GB: T=4096, everything on the
    # device with every block checkpointed (FSDP1's usual recipe), and
    # --offload=auto.
    ("L2-70B A100 none", "llama2-70b", 4096, 8, A100 + ["--activation-checkpointing=units"]),
    ("L2-70B A100 auto", "llama2-70b", 4096, 8, A100 + ["--offload=auto", "--autotune"]),
]


# The host side of the H100 node as costmodel/DeviceModel.cpp's setHost
# prices it: (key, value, unit, source; "ASSUMED" where not measured on
# that hardware).
HOST_RATES = [
    ("device_to_host", 52.8e9, "B/s", "measured: NVIDIA/nvbandwidth#24, an H100 cluster"),
    ("host_to_device", 52.8e9, "B/s", "ASSUMED equal to device-to-host"),
    ("h2d_while_d2h", 0.5, "", "ASSUMED as measured on 8x A100-SXM4 (nvbandwidth#11, #53)"),
    ("d2h_while_h2d", 0.96, "", "ASSUMED as measured on 8x A100-SXM4 (nvbandwidth#11, #53)"),
    ("host_cores", 112, "", "DGX H100 datasheet (2x Xeon 8480C)"),
    ("host_mem_bandwidth", 614.4e9, "B/s", "ASSUMED sustained at the DDR5-4800 peak"),
    ("host_adamw_per_core", 21.7e9, "B/s", "ASSUMED: measured on the project's Xeon "
     "(bench/host_adamw.py), not on a DGX host"),
    ("torch_host_adamw_per_core", 3.84e9, "B/s", "ASSUMED likewise: torch 2.11's for-loop"),
]
# PyTorch's CPU AdamW with fused=True: 20.9 GB/s a core in cost-model bytes
# on the same Xeon (bench/host_adamw.py, 2026-11-26), one pass of 28 bytes
# an element like fsdp's own.
FUSED_TORCH = {"base": "h100-sxm", "name": "h100-sxm (PyTorch fused CPU AdamW)",
               "torch_host_adamw_per_core": 20.9e9, "torch_host_adamw_traffic": 1.0}
FSDP2_AC = {"every block": "--activation-checkpointing=units",
            "selective op": "--activation-checkpointing=ops-alt",
            "every second block": "--activation-checkpointing=" +
            ",".join(f"layers.{i}" for i in range(1, 80, 2)),
            "none": "--activation-checkpointing=none"}


def plan(opt, name, model, T, world, flags):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name.replace(" ", "-").replace(",", "") + ".plan")
    device = [] if any(f.startswith("--device=") for f in flags) else ["--device=h100-sxm"]
    cmd = [opt, shape_model(model, T), f"--world-size={world}", "-o", path] + COMMON + \
        device + flags
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"offload.py: {name}: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    with open(path) as f:
        p = json.load(f)["predicted"]
    busy = {"compute": p["compute_seconds"], "copies": p["copy_seconds"],
            "host": p["host_seconds"]}
    return dict(name=name, world=world, peak=p["peak_bytes"], host=p["host_bytes"],
                step=p["step_seconds"], tok=T / p["step_seconds"], busy=busy,
                busiest=max(busy, key=busy.get),
                autotune=[l for l in r.stdout.splitlines() if "--offload=" in l])


def fsdp2_plans(opt):
    """FSDP2's CPUOffloadPolicy on the 70B node: the for-loop AdamW with
    every block checkpointed, fused AdamW, and fused with the fastest AC
    that fits."""
    os.makedirs(OUT, exist_ok=True)
    fused = os.path.join(OUT, "h100-fused-torch-adamw.json")
    with open(fused, "w") as f:
        json.dump(FUSED_TORCH, f)
    shape = ["--offload=all"] + [f for f in FSDP2 if not f.startswith("--activation")] + \
        ["--reshard-after-forward=default,layers.79=false"]
    rows = [plan(opt, "70B FSDP2 CPUOffload", "llama3-70b", 8192, 8,
                 shape + [FSDP2_AC["every block"]])]
    rows.append(plan(opt, "70B FSDP2 CPUOffload fused AdamW", "llama3-70b", 8192, 8,
                     shape + [FSDP2_AC["every block"], f"--device={fused}"]))
    tried = [plan(opt, f"70B FSDP2 CPUOffload fused AdamW AC {ac}", "llama3-70b", 8192, 8,
                  shape + [flag, f"--device={fused}"]) for ac, flag in FSDP2_AC.items()]
    fits = [r for r in tried if r["peak"] <= 80e9]
    best = max(fits, key=lambda r: r["tok"]) if fits else tried[0]
    best = dict(best, name="70B FSDP2 CPUOffload fused AdamW best AC",
                ac=best["name"].split(" AC ")[1])
    return rows + [best]


def gain_split(opt, fsdp2, ours):
    """fsdp's --offload=all plan against FSDP2's (fused, its best AC), in
    steps that each change one thing."""
    shape = ["--offload=all"] + [f for f in FSDP2_SCHEDULE if not f.startswith("--activation")] + \
        ["--reshard-after-forward=default,layers.79=false", FSDP2_AC[fsdp2["ac"]]]
    after = plan(opt, "70B fsdp offload, FSDP2's schedule, update after backward",
                 "llama3-70b", 8192, 8, shape + ["--offload-update=after-backward"])
    before = plan(opt, "70B fsdp offload, FSDP2's schedule, update before use",
                  "llama3-70b", 8192, 8, shape)
    steps = [("the runtime and program (fsdp-run's copies, casts and host AdamW; "
              "attention without repeat_kv copies; FSDP2's schedule and AC)", fsdp2, after),
             ("the update before the shard's next use, overlapping the forward", after, before),
             ("--autotune's schedule and activation checkpointing", before, ours)]
    return [after, before], steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    opt = os.path.join(a.build, "tools", "fsdp-opt")
    rows = [plan(opt, *c) for c in CASES]
    rows += fsdp2_plans(opt)
    by = {r["name"]: r for r in rows}
    fsdp2 = by["70B FSDP2 CPUOffload fused AdamW best AC"]
    extra, steps = gain_split(opt, fsdp2, by["70B all"])
    rows += extra
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| plan | peak GB/GPU | host GB/GPU | step s | tokens/s/GPU | compute s | "
          "copies s | host s | busiest |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["busy"]
        print(f"| {r['name']} | {r['peak'] / 1e9:.1f} | {r['host'] / 1e9:.1f} | "
              f"{r['step']:.2f} | {r['tok']:.0f} | {b['compute']:.2f} | {b['copies']:.2f} | "
              f"{b['host']:.2f} | {r['busiest']} |")
    print(f"\nFSDP2's fastest activation checkpointing in 80 GB (fused AdamW): {fsdp2['ac']}")
    for name in ("70B optimizer", "70B all", "70B auto"):
        print(f"{name}: {by[name]['tok'] / fsdp2['tok']:.2f}x FSDP2-CPUOffload-shaped "
              f"(fused AdamW, best AC); {by[name]['tok'] / by['70B FSDP2 CPUOffload']['tok']:.2f}x "
              f"with PyTorch's for-loop AdamW and every block checkpointed")
    print(f"\n70B all against FSDP2 (fused, best AC): "
          f"{by['70B all']['tok'] / fsdp2['tok']:.2f}x =")
    for what, lo, hi in steps:
        print(f"  x {hi['tok'] / lo['tok']:.2f}  {what}")
    for name in ("L2-70B A100 none", "L2-70B A100 auto"):
        r = by[name]
        print(f"{name}: {'fits' if r['peak'] <= 80e9 else 'does not fit'} in 80 GB "
              f"(peak {r['peak'] / 1e9:.1f} GB), {r['tok']:.0f} tokens/s/GPU, "
              f"{8 * r['tok']:.0f} tokens/s on the node, against the guide's ~800-900")
    for r in rows:
        for line in r["autotune"]:
            print(f"{r['name']}: {line}")
    print("\nThe H100 node's host side as priced (costmodel/DeviceModel.cpp, setHost):")
    for key, value, unit, source in HOST_RATES:
        shown = f"{value / 1e9:.2f} G{unit}" if unit else f"{value:g}"
        print(f"  {key:26s} {shown:>12s}  {source}")
    print(f"  {'torch fused AdamW a core':26s} {FUSED_TORCH['torch_host_adamw_per_core'] / 1e9:.2f} "
          f"GB/s  ASSUMED likewise: torch 2.11 fused=True on the project's Xeon")
    return 0


if __name__ == "__main__":
    sys.exit(main())
