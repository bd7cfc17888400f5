#!/usr/bin/env python3
"""Fixed FSDP policies against fsdp-opt --autotune, in fsdp-opt's own
simulator (fsdp-simulate on the h100-sxm model, 8 GPUs per node): the
simulated step time, the exposed communication and the predicted peak per
GPU of the plan each policy gives, for GPT-2 1.5B, Llama-3-8B and
Llama-3-70B shapes (bench/make_shape_model.py) on 8 and 64 H100s.

Every policy uses the same model, micro-batch, bf16 parameters with f32
reduction, AdamW, and transformer-block units. What they differ in:

  FSDP2 default   fully_shard per block: reshard after forward except the
                  root, forward prefetch of the next unit (FSDP2's implicit
                  prefetch issues the next all-gather while the current one
                  is in use: two in flight), backward prefetch before.
  FSDP1           BACKWARD_PRE, limit_all_gathers (two in flight),
                  forward_prefetch=False (its default), FULL_SHARD (the root
                  is not resharded after forward).
  torchtitan      FSDP2 with reshard_after_forward=False for the last block
                  (it is gathered again at once in backward) and full
                  activation checkpointing of every block (its 70B recipe).
  autotune        fsdp-opt --autotune with the device's budget (80 GB).

A policy whose peak exceeds the 80 GB budget is marked OOM: it would not
run. Activations are planned in f32 (the plan computes in f32 and gathers in
bf16), so peaks are higher than a bf16-activation runtime's.

    policies.py [--build build] [--worlds 8,64] [--models gpt2-1.5b,...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
BUDGET = 80e9  # bytes: the h100-sxm device model's planning budget

# model: (micro-batch per GPU, name of the last block)
MODELS = {
    "gpt2-1.5b": (4, "h.47"),
    "llama3-8b": (1, "layers.31"),
    "llama3-70b": (1, "layers.79"),
}


def policies(last):
    return [
        ("FSDP2 default", ["--reshard-after-forward=default", "--forward-prefetch=true",
                           "--backward-prefetch=pre", "--prefetch-depth=1",
                           "--limit-all-gathers=2"]),
        ("FSDP1", ["--reshard-after-forward=default", "--forward-prefetch=false",
                   "--backward-prefetch=pre", "--prefetch-depth=1", "--limit-all-gathers=2"]),
        ("torchtitan", [f"--reshard-after-forward=default,{last}=false",
                        "--activation-checkpointing=units", "--forward-prefetch=true",
                        "--backward-prefetch=pre", "--limit-all-gathers=2"]),
        ("autotune", ["--autotune"]),
    ]


def model_path(model, batch):
    """The shape-only model, written on first use (its shapes fix the batch)."""
    out = os.path.join(OUT, f"b{batch}")
    path = os.path.join(out, model + ".onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_shape_model.py"),
                        out, "--model", model, "--batch", str(batch)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def plan(opt, model, batch, world, flags, path):
    cmd = [opt, model_path(model, batch), f"--batch-size={batch}",
           "--loss=cross-entropy", f"--world-size={world}", "--param-dtype=bf16",
           "--device=h100-sxm", "--gpus-per-node=8", "-o", path] + flags
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.time() - t0
    if r.returncode != 0:
        if "no plan fits" in r.stderr:
            return None, r.stderr.strip().splitlines()[-1], took
        sys.exit(f"policies.py: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    with open(path) as f:
        predicted = json.load(f)["predicted"]
    return predicted, r.stdout, took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--worlds", default="8,64")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--show-autotune", action="store_true",
                    help="print --autotune's per-unit lines too")
    a = ap.parse_args()
    opt = os.path.join(a.build, "tools", "fsdp-opt")
    rows = []
    header = ("| model | GPUs | policy | step (s) | exposed comm (s) | peak (GiB) | fits 80 GB |"
              " compile (s) |\n|---|---|---|---|---|---|---|---|")
    print(header)
    for model in a.models.split(","):
        batch, last = MODELS[model]
        for world in map(int, a.worlds.split(",")):
            best_fixed = None
            for name, flags in policies(last):
                path = os.path.join(OUT, f"{model}-{world}-{name.split()[0].lower()}.plan")
                p, stdout, took = plan(opt, model, batch, world, flags, path)
                if p is None:  # --autotune: nothing fits
                    smallest = stdout.split("the smallest predicted peak is ")[1].split(" (")[0]
                    row = (f"| {model} (B={batch}) | {world} | {name} | - | - | "
                           f"{smallest} at least | no plan fits | {took:.1f} |")
                    print(row, flush=True)
                    rows.append(row)
                    if a.show_autotune:
                        print(stdout)
                    continue
                fits = p["peak_bytes"] <= BUDGET
                row = (f"| {model} (B={batch}) | {world} | {name} | {p['step_seconds']:.3f} | "
                       f"{p['exposed_comm_seconds']:.3f} | {p['peak_bytes'] / 2**30:.1f} | "
                       f"{'yes' if fits else 'OOM'} | {took:.1f} |")
                print(row, flush=True)
                rows.append(row)
                if name == "autotune":
                    if a.show_autotune:
                        print(stdout)
                    if best_fixed is not None:
                        gain = best_fixed / p["step_seconds"]
                        print(f"|   |   | autotune vs the fastest fixed policy that fits: "
                              f"{gain:.2f}x |   |   |   |   |   |", flush=True)
                elif fits and (best_fixed is None or p["step_seconds"] < best_fixed):
                    best_fixed = p["step_seconds"]
    with open(os.path.join(OUT, "policies.md"), "w") as f:
        f.write(header + "\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
