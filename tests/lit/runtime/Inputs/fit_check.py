"""Does a plan compiled for a fitted device predict the compute a measured
run took? Sums, over the slowest rank's compute instructions, the
measured time (each instruction's median over the steady steps, as
fsdp-inspect --fit-device reads it) and the plan's predicted time; prints
whether they agree within 1% (the fit's arithmetic: each op's factor is
its measured over predicted sum, so the refit plan reproduces the sums up
to rounding).

    fit_check.py PLAN MEASURED.json
"""
import json
import sys

plan = json.load(open(sys.argv[1]))
events = json.load(open(sys.argv[2]))["traceEvents"]
program = plan["program"]


def compute(i):
    op = program[i]["op"]
    return op not in ("wait", "all_reduce") and not op.endswith("_start") and "predicted" in program[i]


measured, predicted = {}, {}
for e in events:
    i = e.get("args", {}).get("instruction")
    if e.get("ph") != "X" or i is None or not compute(i):
        continue
    r = e["pid"]
    measured[r] = measured.get(r, 0.0) + e["args"].get("median_dur", e["dur"]) / 1e6
    predicted[r] = predicted.get(r, 0.0) + program[i]["predicted"][1] - program[i]["predicted"][0]
# The fit reads the slowest rank, which sets the step.
slowest = max(measured, key=measured.get)
measured, predicted = measured[slowest], predicted[slowest]
print(plan["predicted"]["device"], "compute within 1%:", abs(predicted - measured) <= 0.01 * measured,
      f"predicted {predicted:.6f} s measured {measured:.6f} s")
