"""Compares two fsdp-run --log files step by step.

usage: compare_logs.py A.jsonl B.jsonl --rtol R [--keys loss,grad_norm]

Fails (exit 1) unless both logs have the same steps and every key agrees
within R relative to the larger magnitude (plus R absolute, for values
near zero). Prints the largest difference seen.
"""
import argparse
import json
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--keys", default="loss,grad_norm")
    args = ap.parse_args()
    a, b = read(args.a), read(args.b)
    if not a or len(a) != len(b):
        print(f"step counts differ: {len(a)} and {len(b)}")
        return 1
    worst = 0.0
    for x, y in zip(a, b):
        if x["step"] != y["step"]:
            print(f"steps differ: {x['step']} and {y['step']}")
            return 1
        for k in args.keys.split(","):
            u, v = float(x[k]), float(y[k])
            diff = abs(u - v) / (max(abs(u), abs(v)) + 1.0)
            worst = max(worst, diff)
            if not diff <= args.rtol:  # NaN fails too
                print(f"step {x['step']} {k}: {u} and {v} differ by {diff:.3g}")
                return 1
    print(f"{len(a)} steps agree: largest relative difference {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
