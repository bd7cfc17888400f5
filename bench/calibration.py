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
  torchtitan benchmarks/llama3_h100_202412_torchtitan.md at 31a17bfd
  (its runs: torchtitan 9dec370, torch 1963fc8; Grand Teton: 8
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

The H100s are described as stated: h100-sxm's figures with HBM2e's 2.4
TB/s, 96 GB, and a 500 W part's bf16 peak (H100_500W_PEAK below).

One model prices every point: the built-in devices' sourced constants and
the one constant fitted to this table, `sustained` (costmodel/
DeviceModel.cpp: GEMMs and attention keep that fraction of their best
rates inside a step). `--fit` finds it again (the value at which the mean
of log(predicted / published) is zero); `--sustained F` prices the table
with F instead. `--gains` plans fsdp's own (`--autotune`) against the
FSDP2-shaped plan at three points and splits the gain in three: the FSDP2
schedule priced as fsdp-run runs it (the runtime's share), the attention
layout fsdp's frontend folds (the program's share: no repeat_kv copies or
head transposes, priced but not yet measured on a GPU), then the autotuned
plan against that (the schedule's).

Held out (`--held-out`): a fit judged on the points it was fitted to says
little, so each point is also predicted by a `sustained` fitted without it
(leave one out: fitted on the other nine), and across hardware (fitted on
the eight A100 points, the two H100 points predicted; and back). Each
point is planned once on a grid of sustained fractions and the fit reads
the grid (log of the prediction interpolated linearly between grid
points), so the held-out table costs 16 plans a point, not a bisection
per fold.

The goals, which the exit status holds (1 when one fails): every point
within 15% and the median within 8%, in sample and left out one at a
time; every point predicted across hardware within 20%.

    bench/calibration.py [--build build] [--out DIR] [--json] [--only NAME,...]
                         [--sustained F | --fit | --gains | --held-out]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "calibration")
LAYERS = {"llama3-8b": 32, "llama3-70b": 80, "llama2-13b": 40, "llama2-70b": 80}
TT_PERF = "pytorch/torchtitan@1ea476e9f docs/performance.md"
TT_H100 = "pytorch/torchtitan@31a17bfd benchmarks/llama3_h100_202412_torchtitan.md"

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

# The Grand Teton H100s of TT_H100: h100-sxm (costmodel/DeviceModel.cpp)
# with the page's HBM2e (96 GB at 2.4 TB/s) and its 500 W power limit. The
# page's footnote 2: their peak "is between SXM and NVL, and we don't know
# its exact value". Dense bf16 peaks from NVIDIA's datasheets: H100 SXM
# 989 TFLOP/s at 700 W, H100 NVL 835 at 400 W (1671 with sparsity); taken
# linearly in the power limit between the two: 835 + (989 - 835) x
# (500 - 400) / (700 - 400) = 886 TFLOP/s.
H100_500W_PEAK = 835e12 + (989e12 - 835e12) * (500 - 400) / (700 - 400)
H100_HBM2E = {
    "base": "h100-sxm", "name": "h100-hbm2e-500w (Grand Teton)",
    "flops_bf16": H100_500W_PEAK, "mem_bandwidth": 2.4e12, "memory_bytes": 96_000_000_000,
}


def device_files(sustained):
    """The devices the points name, as files when they differ from the
    built-ins (the H100s above; --sustained on any)."""
    files = {}
    for device in sorted({p[5] for p in POINTS.values()}):
        desc = dict(H100_HBM2E) if device == "h100-hbm2e" else None
        if sustained is not None:
            desc = desc or {"base": device, "name": device}
            desc["sustained"] = sustained
        if desc is None:
            files[device] = device
            continue
        files[device] = os.path.join(OUT, device + ".json")
        with open(files[device], "w") as f:
            json.dump(desc, f)
    return files


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


def base_flags(name, devices):
    """What every plan of the point shares: the job and the hardware."""
    source, model, T, batch, gpus, device, ac, published = POINTS[name]
    return [shape_model(model, T, batch), f"--world-size={gpus}", f"--device={devices[device]}",
            "--gpus-per-node=8", f"--batch-size={batch}", "--compute-dtype=bf16",
            "--param-dtype=bf16", "--reduce-dtype=f32", "--loss=cross-entropy", "--grad-clip=1.0"]


def fsdp2_flags(name):
    """The schedule torchtitan ran: a unit per block, reshard after forward
    but the last, one gather prefetched beside the current, its AC."""
    model, ac = POINTS[name][1], POINTS[name][6]
    return ["--forward-prefetch=true", "--backward-prefetch=pre", "--prefetch-depth=1",
            "--limit-all-gathers=2", f"--reshard-after-forward=default,layers.{LAYERS[model] - 1}=false",
            ac_flag(model, ac)]


def plan(opt, name, devices, flags, tag=""):
    """tokens/s/GPU and the predicted block of the point planned with `flags`."""
    T, batch = POINTS[name][2], POINTS[name][3]
    path = os.path.join(OUT, name + tag + ".plan")
    cmd = [opt] + base_flags(name, devices) + flags + ["-o", path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"calibration.py: {name}: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    with open(path) as f:
        p = json.load(f)["predicted"]
    return batch * T / p["step_seconds"], p


def predict(opt, name, devices):
    """The point as it ran: FSDP2's schedule priced as eager FSDP2, on the
    program eager PyTorch runs (torchtitan's repeat_kv and head transposes,
    which fsdp's own plans fold away: --no-attention-layout)."""
    return plan(opt, name, devices, fsdp2_flags(name) +
                ["--simulate-runtime=fsdp2-eager", "--no-attention-layout"])


def table(opt, names, sustained, show):
    devices = device_files(sustained)
    rows = []
    for name in names:
        source, model, T, batch, gpus, device, ac, published = POINTS[name]
        tok, p = predict(opt, name, devices)
        rows.append(dict(source=source, name=name,
                         config=f"{model} T={T} local batch {batch}, {gpus} x {device}, "
                                f"AC {ac}, eager FSDP2",
                         published=published, predicted=round(tok, 1),
                         error=round(100 * (tok - published) / published, 1),
                         peak_gib=round(p["peak_bytes"] / 2**30, 1)))
        if show:
            r = rows[-1]
            print(f"{name:<22} {r['config']:<62} {published:>6} {tok:>8.0f} {r['error']:>+7.1f}%",
                  flush=True)
    return rows


GOAL_EACH, GOAL_MEDIAN, GOAL_CROSS = 15.0, 8.0, 20.0
GRID = [0.70 + 0.02 * i for i in range(16)]  # 0.70 .. 1.00


def judge(label, errors, each, median=None):
    """Prints the spread of `errors` (percent) and whether it meets the
    goal; returns whether it does."""
    worst = max(abs(e) for e in errors)
    mid = statistics.median(abs(e) for e in errors)
    ok = worst <= each and (median is None or mid <= median)
    goal = f"each within {each:.0f}%" + (f", median within {median:.0f}%" if median else "")
    print(f"{label}: median |error| {mid:.1f}%, largest {worst:.1f}% "
          f"(goal: {goal}) {'met' if ok else 'MISSED'}")
    return ok


def grid_predictions(opt, names):
    """{name: [log tokens/s/GPU at each GRID fraction]}."""
    logs = {n: [] for n in names}
    for f in GRID:
        for r in table(opt, names, f, False):
            logs[r["name"]].append(math.log(r["predicted"]))
        print(f"  sustained {f:.2f} planned", flush=True)
    return logs


def at(logs, f):
    """The log prediction at fraction f, linear between grid points."""
    k = min(max(int((f - GRID[0]) / (GRID[1] - GRID[0])), 0), len(GRID) - 2)
    w = (f - GRID[k]) / (GRID[k + 1] - GRID[k])
    return logs[k] * (1 - w) + logs[k + 1] * w


def fit_on(logs, names):
    """The fraction at which `names`' predictions are unbiased (the mean of
    log(predicted / published) is zero), read from the grid."""
    def bias(f):
        return statistics.mean(at(logs[n], f) - math.log(POINTS[n][7]) for n in names)
    lo, hi = GRID[0], GRID[-1]
    if bias(lo) > 0 or bias(hi) < 0:
        sys.exit(f"calibration.py: the fit of {', '.join(names)} lies outside "
                 f"sustained {GRID[0]:.2f}-{GRID[-1]:.2f}")
    while hi - lo > 1e-5:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if bias(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def error_at(logs, name, f):
    return 100 * (math.exp(at(logs[name], f)) / POINTS[name][7] - 1)


def held_out(opt, names):
    """Leave-one-out and cross-hardware errors; whether their goals hold."""
    logs = grid_predictions(opt, names)
    everything = fit_on(logs, names)
    rows = []
    for n in names:
        rest = [m for m in names if m != n]
        f = fit_on(logs, rest)
        rows.append(dict(name=n, published=POINTS[n][7],
                         in_sample=round(error_at(logs, n, everything), 1),
                         loo_sustained=round(f, 3), left_out=round(error_at(logs, n, f), 1)))
    a100 = [n for n in names if POINTS[n][5] == "a100-80g"]
    h100 = [n for n in names if POINTS[n][5] != "a100-80g"]
    cross = {}
    if a100 and h100:
        on_a100, on_h100 = fit_on(logs, a100), fit_on(logs, h100)
        for n in h100:
            cross[n] = ("A100", on_a100, error_at(logs, n, on_a100))
        for n in a100:
            cross[n] = ("H100", on_h100, error_at(logs, n, on_h100))
    print(f"\nfitted on all {len(names)}: sustained {everything:.3f}")
    print(f"{'point':<22} {'published':>9} {'in sample':>10} {'left out':>9} "
          f"{'(fit)':>6} {'other hw':>9} {'(fit on)':>12}")
    for r in rows:
        c = cross.get(r["name"])
        r["cross_hardware"] = round(c[2], 1) if c else None
        print(f"{r['name']:<22} {r['published']:>9} {r['in_sample']:>+9.1f}% "
              f"{r['left_out']:>+8.1f}% {r['loo_sustained']:>6.3f} " +
              (f"{c[2]:>+8.1f}% {c[0]:>5} {c[1]:.3f}" if c else ""))
    ok = judge("in sample", [r["in_sample"] for r in rows], GOAL_EACH, GOAL_MEDIAN)
    ok &= judge("left out one at a time", [r["left_out"] for r in rows], GOAL_EACH, GOAL_MEDIAN)
    if cross:
        ok &= judge("across hardware", [c[2] for c in cross.values()], GOAL_CROSS)
    return rows, ok


def fit(opt, names):
    """The sustained fraction at which the table's predictions are unbiased:
    the mean of log(predicted / published) is zero (bisection)."""
    def bias(f):
        rows = table(opt, names, f, False)
        return statistics.mean(math.log(r["predicted"] / r["published"]) for r in rows)
    lo, hi = 0.5, 1.0
    while hi - lo > 0.001:
        mid = (lo + hi) / 2
        b = bias(mid)
        print(f"sustained {mid:.4f}: mean log(predicted / published) {b:+.4f}", flush=True)
        lo, hi = (mid, hi) if b < 0 else (lo, mid)
    return (lo + hi) / 2


GAIN_POINTS = ["l3.1-8b-h100x8-sel", "l3-70b-a100-full", "l3.1-8b-h100x128-sel"]


def gains(opt, names):
    """fsdp's own plan against the FSDP2-shaped one at each point, the gain
    split in three: FSDP2's schedule on eager's program priced as fsdp-run
    runs it (the runtime's share), the same with fsdp-attention-layout's
    program (no repeat_kv copies, no head transposes: the program's share,
    priced, not yet measured on a GPU), then --autotune's plan against that
    (the schedule's share)."""
    devices = device_files(None)
    rows = []
    for name in names:
        fsdp2, _ = predict(opt, name, devices)
        flags = fsdp2_flags(name) + ["--simulate-runtime=fsdp"]
        ran, _ = plan(opt, name, devices, flags + ["--no-attention-layout"], "-fsdp")
        folded, _ = plan(opt, name, devices, flags, "-fsdp-layout")
        tuned, _ = plan(opt, name, devices, ["--autotune"], "-autotune")
        rows.append(dict(name=name, published=POINTS[name][7], fsdp2=round(fsdp2, 1),
                         fsdp2_as_fsdp_run=round(ran, 1), with_layout=round(folded, 1),
                         autotuned=round(tuned, 1), gain=round(tuned / fsdp2, 3),
                         runtime_share=round(ran / fsdp2, 3),
                         program_share=round(folded / ran, 3),
                         schedule_share=round(tuned / folded, 3)))
        r = rows[-1]
        print(f"{name:<22} FSDP2-shaped {fsdp2:6.0f}  as fsdp-run {ran:6.0f}  attention "
              f"layout {folded:6.0f}  autotuned {tuned:6.0f}  gain {r['gain']:.3f}x = runtime "
              f"{r['runtime_share']:.3f}x x program {r['program_share']:.3f}x x schedule "
              f"{r['schedule_share']:.3f}x", flush=True)
    return rows


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=OUT, help="where the shape models and plans go")
    ap.add_argument("--json", action="store_true", help="a list of objects, for scripts")
    ap.add_argument("--only", default="", help="comma-separated point names")
    ap.add_argument("--sustained", type=float,
                    help="price with this fraction of the best GEMM and attention rates "
                         "sustained, not the built-in devices' (to see what the fit rests on)")
    ap.add_argument("--fit", action="store_true",
                    help="find the sustained fraction that leaves the table unbiased")
    ap.add_argument("--held-out", action="store_true",
                    help="each point predicted by a fit without it (leave one out) and "
                         "across hardware (A100 fit for H100 points, and back)")
    ap.add_argument("--gains", action="store_true",
                    help="fsdp's autotuned plan against the FSDP2-shaped one at three points")
    a = ap.parse_args()
    opt = os.path.join(a.build, "tools", "fsdp-opt")
    OUT = a.out
    os.makedirs(OUT, exist_ok=True)
    names = [n for n in POINTS if not a.only or n in a.only.split(",")]
    if a.fit:
        print(f"fitted sustained fraction: {fit(opt, names):.3f}")
        return 0
    if a.held_out:
        rows, ok = held_out(opt, names)
        if a.json:
            print(json.dumps(rows, indent=1))
        return 0 if ok else 1
    if a.gains:
        rows = gains(opt, [n for n in GAIN_POINTS if n in names])
        if a.json:
            print(json.dumps(rows, indent=1))
        return 0
    rows = table(opt, names, a.sustained, not a.json)
    if a.json:
        print(json.dumps([{k: r[k] for k in ("source", "config", "published", "predicted")}
                          for r in rows], indent=1))
    return 0 if judge("in sample", [r["error"] for r in rows], GOAL_EACH, GOAL_MEDIAN) else 1


if __name__ == "__main__":
    sys.exit(main())
