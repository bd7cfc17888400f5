#!/usr/bin/env python3
"""How repeatable is a step time on this machine? The ceiling on any
prediction's agreement with a single measured run.

Trains the demo's GPT-2 (d=64, 4 layers, T=32, vocabulary 256, batch 8;
`make demo`) on one process for --seconds, the same plan throughout, and
cuts its steps into back-to-back windows of W seconds. Per W it prints:

  - the spread of the windows' median steps (5th to 95th percentile,
    relative to the median of them all);
  - how often two adjacent windows' medians agree within 10% (and two
    windows 4 W apart).

Nothing about the workload changes between windows, so whatever moves
their medians is the machine: on a shared VM, neighbours on its cores. A
prediction made once cannot agree with single runs of W seconds more often
than two such runs agree with each other; bench/out_of_the_box.py's
10% target is to be read against this. The plan is priced on
--device=cpu-generic (this bench needs no calibration and prints no
prediction).

    bench/machine_noise.py [--build build] [--seconds 60] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = ["--dim", "64", "--layers", "4", "--heads", "4", "--seq", "32", "--vocab", "256"]
WINDOWS = (0.5, 1.0, 2.0, 5.0, 13.0)


def windows(steps_ms, width):
    """Medians of back-to-back windows of `width` seconds (whole steps)."""
    out, current, elapsed = [], [], 0.0
    for ms in steps_ms:
        current.append(ms)
        elapsed += ms / 1e3
        if elapsed >= width:
            out.append(statistics.median(current))
            current, elapsed = [], 0.0
    return out


def agreement(medians, lag):
    pairs = list(zip(medians, medians[lag:]))
    if not pairs:
        return float("nan")
    return sum(abs(b / a - 1) <= 0.10 for a, b in pairs) / len(pairs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", help="write the table here as a list of objects")
    a = ap.parse_args()
    tools = os.path.join(a.build, "tools")
    with tempfile.TemporaryDirectory() as tmp:
        j = lambda name: os.path.join(tmp, name)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"),
                        "gpt2", "--loss", "--dynamic-batch", "-o", j("demo.onnx")] + DEMO,
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "make_dataset.py"),
                        j("demo.npz"), "--rows", "64", "--seq", "32", "--vocab", "256"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([os.path.join(tools, "fsdp-opt"), j("demo.onnx"), "--batch-size=8",
                        "--device=cpu-generic", "-o", j("demo.plan")], check=True,
                       stderr=subprocess.DEVNULL)
        # A short run sizes the long one.
        subprocess.run([os.path.join(tools, "fsdp-run"), j("demo.plan"), "--data", j("demo.npz"),
                        "--steps", "50", "--log", j("probe.jsonl"), "--quiet"], check=True)
        probe = [json.loads(l)["step_ms"] for l in open(j("probe.jsonl"))][1:]
        steps = max(100, int(a.seconds * 1e3 / statistics.median(probe)))
        subprocess.run([os.path.join(tools, "fsdp-run"), j("demo.plan"), "--data", j("demo.npz"),
                        "--steps", str(steps), "--log", j("run.jsonl"), "--quiet"], check=True)
        steps_ms = [json.loads(l)["step_ms"] for l in open(j("run.jsonl"))][1:]
    overall = statistics.median(steps_ms)
    print(f"the demo's GPT-2 on one process: {len(steps_ms)} steps over "
          f"{sum(steps_ms) / 1e3:.1f} s, median step {overall:.2f} ms, fastest "
          f"{min(steps_ms):.2f} ms")
    print(f"{'window':>7} {'windows':>7} {'p5..p95 of window medians':>27} "
          f"{'adjacent within 10%':>20} {'4 apart within 10%':>19}")
    rows = []
    for width in WINDOWS:
        medians = windows(steps_ms, width)
        if len(medians) < 3:
            continue
        q = statistics.quantiles(medians, n=20)
        lo, hi = 100 * (q[0] / overall - 1), 100 * (q[-1] / overall - 1)
        near, far = agreement(medians, 1), agreement(medians, 4)
        rows.append({"window_seconds": width, "windows": len(medians),
                     "p5_percent": lo, "p95_percent": hi,
                     "adjacent_within_10": near, "four_apart_within_10": far})
        print(f"{width:>6.1f}s {len(medians):>7} {lo:>+12.1f}% .. {hi:>+6.1f}%      "
              f"{100 * near:>14.0f}% {100 * far:>18.0f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
