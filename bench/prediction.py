#!/usr/bin/env python3
"""Predicted against measured on the CPU backend: step time and peak memory
of GPT-2 plans at world sizes 1, 2 and 4 (targets: 10% and 2%).

  1. `fsdp-run --calibrate` measures this machine (gemm rate, bandwidth,
     cores, parallel efficiency) into a device JSON.
  2. A *different* GPT-2 (d=128, 2 layers) is compiled for that device, run
     on one rank with --trace, and `fsdp-inspect --fit-device` fits per-op
     factors (op_scale) to it: what each kernel takes against its roofline.
  3. The GPT-2 of bench/memory.py (d=256, 4 layers, T=128, vocabulary 512,
     global batch 8) is compiled for the fitted device at world sizes 1, 2
     and 4 (mpirun, the ranks sharing this machine's cores), run, and its
     prediction compared with the measured median step (steps after the
     first) and the measured peak (stored state + the arena's high-water
     mark + kernel scratch).

    bench/prediction.py [--build build] [--steps 8]
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def gpt2(path, dim, layers):
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"), "gpt2",
                    "--loss", "--dim", str(dim), "--layers", str(layers), "--seq", "128",
                    "--vocab", "512", "--dynamic-batch", "-o", path], check=True)


def run(tools, plan, world, steps, trace):
    cmd = [os.path.join(tools, "fsdp-run"), plan, "--steps", str(steps), "--quiet",
           "--trace", trace]
    subprocess.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd, check=True)
    with open(plan) as f:
        predicted = json.load(f)["predicted"]
    with open(trace) as f:
        measured = json.load(f)["otherData"]
    return predicted, measured


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    tools = os.path.join(a.build, "tools")
    with tempfile.TemporaryDirectory() as tmp:
        j = lambda name: os.path.join(tmp, name)
        with open(j("cpu.json"), "w") as f:
            subprocess.run([os.path.join(tools, "fsdp-run"), "--calibrate"], stdout=f, check=True)
        device = json.load(open(j("cpu.json")))
        print(f"calibrated: {device['flops_f32'] / 1e9:.0f} GFLOP/s, "
              f"{device['mem_bandwidth'] / 1e9:.1f} GB/s, {device['cores']} cores, "
              f"parallel efficiency {device['parallel_efficiency']:.2f}")

        gpt2(j("fit.onnx"), 128, 2)
        subprocess.run([os.path.join(tools, "fsdp-opt"), j("fit.onnx"), "--batch-size=8",
                        f"--device={j('cpu.json')}", "-o", j("fit.plan")], check=True,
                       stderr=subprocess.DEVNULL)
        run(tools, j("fit.plan"), 1, a.steps, j("fit-trace.json"))
        fit = subprocess.run([os.path.join(tools, "fsdp-inspect"), j("fit.plan"), "--compare",
                              j("fit-trace.json"), "--fit-device", j("cpu.json"), "--fit-out",
                              j("fitted.json")], check=True, capture_output=True, text=True)
        print("fitted on GPT-2 d=128 L=2 (world 1):")
        print(fit.stdout.split("== device fitted")[1].split("\n", 1)[1].rstrip())

        gpt2(j("gpt2.onnx"), 256, 4)
        print("\nGPT-2 d=256 L=4 T=128 vocabulary 512, global batch 8, full-shard")
        print(f"{'world':>5} {'step pred ms':>12} {'step meas ms':>12} {'error':>7}   "
              f"{'peak pred MiB':>13} {'peak meas MiB':>13} {'error':>7}")
        for world in (1, 2, 4):
            plan = j(f"w{world}.plan")
            subprocess.run([os.path.join(tools, "fsdp-opt"), j("gpt2.onnx"),
                            f"--batch-size={8 // world}", f"--world-size={world}",
                            f"--device={j('fitted.json')}", "-o", plan], check=True,
                           stderr=subprocess.DEVNULL)
            p, m = run(tools, plan, world, a.steps, j(f"w{world}-trace.json"))
            ps, ms = p["step_seconds"], m["step_seconds"]
            pp, mp = p["peak_bytes"], m["peak_bytes"]
            print(f"{world:>5} {ps * 1e3:>12.1f} {ms * 1e3:>12.1f} {100 * (ps - ms) / ms:>+6.1f}%   "
                  f"{pp / 2**20:>13.2f} {mp / 2**20:>13.2f} {100 * (pp - mp) / mp:>+6.1f}%",
                  flush=True)


if __name__ == "__main__":
    main()
