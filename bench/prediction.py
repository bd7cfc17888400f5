#!/usr/bin/env python3
"""Predicted against measured on the CPU backend: step time and peak memory
of GPT-2 plans at world sizes 1, 2 and 4 (targets: 10% and 2%).

  1. `fsdp-run --calibrate` measures this machine (gemm rate, bandwidth,
     cores, parallel efficiency) into a device JSON.
  2. A *different*, shallower GPT-2 (the target's width, 2 layers instead
     of 4) is compiled for that device and run with --trace at world size 1
     (ranks on 2 threads) and 2 (ranks on 1 thread each);
     `fsdp-inspect --fit-device` fits per-op factors to each: `op_scale`
     and `op_scale_threads.1` (what each kernel takes against its
     roofline, on that many threads). Times are per-instruction medians
     over the steps after the first.
  3. The GPT-2 of bench/memory.py (d=256, 4 layers, T=128, vocabulary 512,
     global batch 8) is compiled for the fitted device at world sizes 1, 2
     and 4 (mpirun, the ranks sharing this machine's cores: at 4, two ranks
     time-share each core), run, and its prediction compared with the
     measured median step (steps after the first) and the measured peak
     (stored state + the arena's high-water mark + kernel scratch).

This 2-vCPU VM's speed drifts by 10-20% from one minute to the next (the
same plan, run twice, differs by that much), so the whole fit-and-predict
round is repeated (--rounds) and the median error per world size reported.

    bench/prediction.py [--build build] [--steps 10] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
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


def compile_plan(tools, model, world, device, plan):
    """The plan of `model` at `world` ranks (global batch 8) for `device`."""
    subprocess.run([os.path.join(tools, "fsdp-opt"), model, f"--batch-size={8 // world}",
                    f"--world-size={world}", f"--device={device}", "-o", plan], check=True,
                   stderr=subprocess.DEVNULL)


def fit(tools, tmp, world, base, steps):
    """Fits `base` to the shallow model run at `world` ranks; returns the
    fitted device's path."""
    j = lambda name: os.path.join(tmp, name)
    plan = j(f"fit{world}.plan")
    compile_plan(tools, j("fit.onnx"), world, base, plan)
    run(tools, plan, world, steps, j(f"fit{world}-trace.json"))
    out = j(f"fitted{world}.json")
    subprocess.run([os.path.join(tools, "fsdp-inspect"), plan, "--compare",
                    j(f"fit{world}-trace.json"), "--fit-device", base, "--fit-out", out],
                   check=True, capture_output=True, text=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
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
        gpt2(j("fit.onnx"), 256, 2)
        gpt2(j("gpt2.onnx"), 256, 4)
        print("fit: GPT-2 d=256 L=2 at world sizes 1 and 2; predicted: GPT-2 d=256 L=4 "
              "T=128 vocabulary 512, global batch 8, full-shard")
        print(f"{'round':>5} {'world':>5} {'step pred ms':>12} {'step meas ms':>12} {'error':>7}   "
              f"{'peak pred MiB':>13} {'peak meas MiB':>13} {'error':>7}")
        errors = {1: [], 2: [], 4: []}
        peaks = {1: [], 2: [], 4: []}
        for rnd in range(1, a.rounds + 1):
            # Each fit runs just before the runs it predicts: this machine's
            # speed drifts over minutes.
            fitted = j("cpu.json")
            for world in (1, 2, 4):
                if world < 4:
                    fitted = fit(tools, tmp, world, fitted, a.steps)
                plan = j(f"w{world}.plan")
                compile_plan(tools, j("gpt2.onnx"), world, fitted, plan)
                p, m = run(tools, plan, world, a.steps, j(f"w{world}-trace.json"))
                ps, ms = p["step_seconds"], m["step_seconds"]
                pp, mp = p["peak_bytes"], m["peak_bytes"]
                errors[world].append(100 * (ps - ms) / ms)
                peaks[world].append(100 * (pp - mp) / mp)
                print(f"{rnd:>5} {world:>5} {ps * 1e3:>12.1f} {ms * 1e3:>12.1f} "
                      f"{errors[world][-1]:>+6.1f}%   {pp / 2**20:>13.2f} {mp / 2**20:>13.2f} "
                      f"{peaks[world][-1]:>+6.1f}%", flush=True)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        print("median error over rounds: " + ", ".join(
            f"world {w}: step {med(errors[w]):+.1f}%, peak {med(peaks[w]):+.1f}%"
            for w in (1, 2, 4)))
        missed = [f"world {w} step {med(errors[w]):+.1f}%" for w in (1, 2, 4)
                  if abs(med(errors[w])) > 10] + \
                 [f"world {w} peak {med(peaks[w]):+.1f}%" for w in (1, 2, 4)
                  if abs(med(peaks[w])) > 2]
        if missed:
            print("prediction.py: MISSED the targets (step 10%, peak 2%): " + ", ".join(missed))
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(main())
