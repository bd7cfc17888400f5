#!/usr/bin/env python3
"""Plans at the scale FSDP is for, beside what is known to run there.

Shape-only Llama models (bench/make_shape_model.py: no weight is ever
written), bf16 compute and gathers with f32 master weights and AdamW
(`--compute-dtype=bf16 --param-dtype=bf16`), micro-batch 1,
`--loss=cross-entropy`, gradients clipped to norm 1 (torchtitan's
max_norm), 8 GPUs a node:

  A    Llama-3-8B, T=2048, 8 x h100-sxm, full-shard, full activation
       checkpointing (`--activation-checkpointing=units`): fsdp's defaults.
  A'   the same job planned the way FSDP2 runs it (below).
  A'f  A' priced as fsdp-run runs it (the FSDP2 schedule without eager
       PyTorch's extra kernels): separates the runtime's share of A*'s
       gain from the schedule's.
  A*   fsdp-opt --autotune on A (the device's 80 GB budget).
  B    Llama-3-70B, T=8192, 64 x a100-80g, as A.
  B'   the same job planned the way FSDP2 runs it. torchtitan trains exactly
       this (docs/performance.md: Llama 3 70B, 64 A100 80GB, local batch 1,
       full AC, FSDP2) at 331 tokens/s/GPU, MFU 51.7%: the anchor the
       simulator is calibrated against (goal: within +-15%).
  B'f  B' priced as fsdp-run runs it (as A'f).
  B*   fsdp-opt --autotune on B (goal: >= 1.10 x B').
  C    Llama-3-70B, T=2048, 1024 x h100-sxm, --autotune (goal: a plan in the
       80 GB card, found in under 10 s).

"The way FSDP2 runs it" (torchtitan's parallelize_llama): fully_shard per
transformer block, reshard after forward except the last block, the next
unit's all-gather prefetched (one in flight beside the current), f32
gradient reduction, full activation checkpointing, causal (flash) attention;
priced as eager PyTorch ran it at the anchor (pytorch/torchtitan 1ea476e9f,
compile = false): `--simulate-runtime=fsdp2-eager` adds FSDP2's all-gather
copy-out on the compute stream, prices RMSNorm as torchtitan's unfused f32
`_norm(x.float()).type_as(x)` and AdamW as its foreach=True passes.

Lower bound (per GPU, written out in lower_bound()): what must be resident
at the busiest moment of any schedule for the job:
  state       12 bytes a parameter / N   (f32 shard, AdamW's m and v)
  checkpoints L x B x T x d x 2          (each block's bf16 input)
  then the larger of
    at the loss: the root unit gathered (bf16) + logits and their gradient
                 (B x T x V x 2 x 2)
    in a block:  two blocks gathered (bf16: the one computing and the next,
                 prefetched) + one block's activations during recompute,
                 B x T x (9d + 3 d_kv + 4 F) x 2 bytes (the bf16 inputs of
                 its matmuls, norms, RoPE, attention and SwiGLU)
MFU as torchtitan computes it: (6 x non-embedding parameters + 12 x L x H x
head_dim x T) flops a token, against the device's dense bf16 peak.

GPT-2 124M memory truth: d=768, 12 layers, vocabulary 50304, T=256, global
batch 4, trained 3 steps by fsdp-run on this CPU at world sizes 1 and 2
(mpirun), with and without activation checkpointing: the plan's predicted
process peak (arena + state + kernel scratch, plus the runtime's own
resident bytes from the device model and MPI's reduction temporaries)
against the peak RSS the run measures (goal: within 3%).

    bench/scale.py [--build build] [--cases A,A',A'f,A*,B,B',B'f,B*,C,gpt2]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "scale")
GIB = 2**30
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]

# Shapes (bench/make_shape_model.py's CONFIGS).
MODELS = {
    "llama3-8b": dict(L=32, D=4096, FFN=14336, V=128256, H=32, KV=8),
    "llama3-70b": dict(L=80, D=8192, FFN=28672, V=128256, H=64, KV=8),
}
PEAK_BF16 = {"h100-sxm": 989e12, "a100-80g": 312e12}
CARD = {"h100-sxm": 80e9, "a100-80g": 80e9}

COMMON = ["--compute-dtype=bf16", "--param-dtype=bf16", "--batch-size=1",
          "--loss=cross-entropy", "--gpus-per-node=8", "--grad-clip=1.0"]
FSDP2_SCHEDULE = ["--activation-checkpointing=units", "--forward-prefetch=true",
                  "--backward-prefetch=pre", "--prefetch-depth=1",
                  "--limit-all-gathers=2", "--reduce-dtype=f32"]
# Eager PyTorch runs the model's own program: torchtitan's Llama copies k and
# v per query head (repeat_kv) and transposes heads around SDPA, which
# fsdp-attention-layout folds away in fsdp's own plans.
FSDP2 = FSDP2_SCHEDULE + ["--simulate-runtime=fsdp2-eager", "--no-attention-layout"]

# name: (model, T, world, device, flags, anchor)
CASES = {
    "A": ("llama3-8b", 2048, 8, "h100-sxm", ["--activation-checkpointing=units"], None),
    "A'": ("llama3-8b", 2048, 8, "h100-sxm",
           FSDP2 + ["--reshard-after-forward=default,layers.31=false"], None),
    "A'f": ("llama3-8b", 2048, 8, "h100-sxm",
            FSDP2_SCHEDULE + ["--reshard-after-forward=default,layers.31=false"], None),
    "A*": ("llama3-8b", 2048, 8, "h100-sxm", ["--autotune"], None),
    "B": ("llama3-70b", 8192, 64, "a100-80g", ["--activation-checkpointing=units"], None),
    "B'": ("llama3-70b", 8192, 64, "a100-80g",
           FSDP2 + ["--reshard-after-forward=default,layers.79=false"], 331.0),
    "B'f": ("llama3-70b", 8192, 64, "a100-80g",
            FSDP2_SCHEDULE + ["--reshard-after-forward=default,layers.79=false"], None),
    "B*": ("llama3-70b", 8192, 64, "a100-80g", ["--autotune"], None),
    "C": ("llama3-70b", 2048, 1024, "h100-sxm", ["--autotune"], None),
}


def params(m):
    c = MODELS[m]
    d, f, v, kv = c["D"], c["FFN"], c["V"], c["KV"] * c["D"] // c["H"]
    block = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d
    root = 2 * v * d + d  # embedding, output projection, final norm
    return block, root, c["L"] * block + root


def lower_bound(m, T, world, B=1):
    c = MODELS[m]
    d, f, v, kv = c["D"], c["FFN"], c["V"], c["KV"] * c["D"] // c["H"]
    block, root, total = params(m)
    state = 12 * total / world
    checkpoints = c["L"] * B * T * d * 2
    at_loss = 2 * root + B * T * v * 2 * 2
    in_block = 2 * 2 * block + B * T * (9 * d + 3 * kv + 4 * f) * 2
    return state + checkpoints + max(at_loss, in_block)


def mfu(m, T, tokens_per_s, device):
    c = MODELS[m]
    _, _, total = params(m)
    non_embedding = total - c["V"] * c["D"]
    per_token = 6 * non_embedding + 12 * c["L"] * c["H"] * (c["D"] // c["H"]) * T
    return tokens_per_s * per_token / PEAK_BF16[device]


def shape_model(model, T):
    out = os.path.join(OUT, f"{model}-T{T}")
    path = os.path.join(out, model + ".onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_shape_model.py"),
                        out, "--model", model, "--seq", str(T)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def run_measured(cmd):
    """Runs cmd; returns (CompletedProcess-like stdout/stderr/rc, seconds, peak RSS bytes)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    took = time.time() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return p.returncode, out, err, took, rss


def plan_case(opt, name):
    model, T, world, device, flags, anchor = CASES[name]
    path = os.path.join(OUT, name.replace("'", "p").replace("*", "t") + ".plan")
    cmd = [opt, shape_model(model, T), f"--world-size={world}", f"--device={device}",
           "-o", path] + COMMON + flags
    # Each case in a child of its own, so RUSAGE_CHILDREN is its own peak.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rc, out, err, took, rss = run_measured(cmd)
        os.write(w, json.dumps([rc, out[-4000:], err[-4000:], took, rss]).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    rc, out, err, took, rss = json.loads(data)
    if rc != 0:
        sys.exit(f"scale.py: case {name}: {' '.join(cmd)} failed:\n{err[-2000:]}")
    with open(path) as f:
        plan = json.load(f)
    p = plan["predicted"]
    tok = T / p["step_seconds"]
    return dict(name=name, model=model, T=T, world=world, device=device, anchor=anchor,
                peak=p["peak_bytes"], arena=p["arena_bytes"], live=p["live_peak_bytes"],
                state=p["state_bytes"], scratch=p["scratch_bytes"],
                constants=sum(constant_bytes(c) for c in plan.get("constants", [])),
                step=p["step_seconds"], exposed=p["exposed_comm_seconds"], tok=tok,
                mfu=mfu(model, T, tok, device), lb=lower_bound(model, T, world),
                compile=took, rss=rss, plan_bytes=os.path.getsize(path),
                fits=p["peak_bytes"] <= CARD[device], autotune=out if "--autotune" in flags else "")


def constant_bytes(c):
    n = 1
    for d in c["shape"]:
        n *= d
    return n * {"f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i1": 1}.get(c["dtype"], 4)


def print_scale(rows):
    print("| case | job | peak GiB (lower bound) | arena / live GiB | state GiB | constants MiB "
          "| scratch MiB | fits 80 GB | sim tok/s/GPU (anchor) | MFU | exposed comm s "
          "| compile s | compile RSS GiB | plan MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        anchor = f" ({r['anchor']:.0f}: {r['tok'] / r['anchor']:.2f}x)" if r["anchor"] else ""
        print(f"| {r['name']} | {r['model']} T={r['T']} x{r['world']} {r['device']} "
              f"| {r['peak'] / GIB:.1f} ({r['lb'] / GIB:.1f}) "
              f"| {r['arena'] / GIB:.1f} / {r['live'] / GIB:.1f} | {r['state'] / GIB:.1f} "
              f"| {r['constants'] / 2**20:.0f} | {r['scratch'] / 2**20:.0f} "
              f"| {'yes' if r['fits'] else 'NO'} | {r['tok']:.0f}{anchor} | {100 * r['mfu']:.1f}% "
              f"| {r['exposed']:.2f} | {r['compile']:.1f} | {r['rss'] / GIB:.2f} "
              f"| {r['plan_bytes'] / 1e6:.0f} |", flush=True)
    by = {r["name"]: r for r in rows}
    missed = []
    for r in rows:
        if r["anchor"] and abs(r["tok"] / r["anchor"] - 1) > 0.15:
            missed.append(f"{r['name']} {r['tok'] / r['anchor']:.2f}x its anchor (goal within 15%)")
    if "B*" in by and "B'" in by and by["B*"]["tok"] < 1.10 * by["B'"]["tok"]:
        gain = by["B*"]["tok"] / by["B'"]["tok"]
        missed.append(f"B* {gain:.3f}x B' (goal >= 1.10x)")
    if "C" in by and (not by["C"]["fits"] or by["C"]["compile"] > 10):
        missed.append(f"C fits {by['C']['fits']}, compiled in {by['C']['compile']:.1f} s "
                      f"(goal: fits 80 GB, under 10 s)")
    for tuned, fsdp2 in (("A*", "A'"), ("B*", "B'")):
        if tuned in by and fsdp2 in by:
            print(f"{tuned} against {fsdp2} (FSDP2's schedule, same simulator): "
                  f"{by[tuned]['tok'] / by[fsdp2]['tok']:.3f}x tokens/s")
        ran = fsdp2 + "f"
        if tuned in by and fsdp2 in by and ran in by:
            print(f"  of which fsdp-run's kernels and copies ({ran} against "
                  f"{fsdp2}): {by[ran]['tok'] / by[fsdp2]['tok']:.3f}x; the "
                  f"tuned schedule ({tuned} against {ran}): "
                  f"{by[tuned]['tok'] / by[ran]['tok']:.3f}x")
    return missed


def gpt2_memory(opt, run, worlds=(1, 2)):
    """GPT-2 124M on this CPU: the process's predicted peak (the plan's
    memory, the runtime's own, MPI's reduction temporaries) against the
    peak RSS measured; the configurations whose RSS leaves 3% of it."""
    missed = []
    print("\n| GPT-2 124M (CPU) | plan peak MiB | + runtime + MPI temporaries MiB "
          "| measured peak RSS MiB | RSS / predicted | arena plan / high water MiB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gen_model.py"),
                        "gpt2", "--loss", "--dim", "768", "--layers", "12", "--heads", "12",
                        "--seq", "256", "--vocab", "50304", "--dynamic-batch", "-o", onnx],
                       check=True, stdout=subprocess.DEVNULL)
        for world in worlds:
            for ac in (False, True):
                plan = os.path.join(tmp, f"{world}-{ac}.plan")
                subprocess.run([opt, onnx, "-o", plan, f"--world-size={world}",
                                f"--batch-size={4 // world}"] +
                               (["--activation-checkpointing=units"] if ac else []),
                               check=True, stderr=subprocess.DEVNULL)
                pred = json.load(open(plan))["predicted"]
                predicted = pred["process_peak_bytes"]
                log = os.path.join(tmp, f"{world}-{ac}.jsonl")
                cmd = [run, plan, "--steps", "3", "--log", log, "--quiet"]
                subprocess.run((MPIRUN + ["-np", str(world)] if world > 1 else []) + cmd,
                               check=True)
                last = [json.loads(l) for l in open(log)][-1]
                rss = last["rss_peak_bytes"]
                print(f"| world {world}{' + AC' if ac else ''} | {pred['peak_bytes'] / 2**20:.0f} "
                      f"| {predicted / 2**20:.0f} "
                      f"| {rss / 2**20:.0f} | {rss / predicted:.3f} "
                      f"| {last['arena_bytes'] / 2**20:.0f} / "
                      f"{last['arena_high_water'] / 2**20:.0f} |", flush=True)
                if abs(rss / predicted - 1) > 0.03:
                    missed.append(f"GPT-2 world {world}{' + AC' if ac else ''}: RSS "
                                  f"{rss / predicted:.3f}x predicted (goal within 3%)")
    return missed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cases", default=",".join(list(CASES) + ["gpt2"]))
    ap.add_argument("--show-autotune", action="store_true")
    a = ap.parse_args()
    opt = os.path.join(a.build, "tools", "fsdp-opt")
    run = os.path.join(a.build, "tools", "fsdp-run")
    os.makedirs(OUT, exist_ok=True)
    names = a.cases.split(",")
    rows = [plan_case(opt, n) for n in names if n in CASES]
    missed = []
    if rows:
        missed += print_scale(rows)
    if a.show_autotune:
        for r in rows:
            if r["autotune"]:
                print(f"\n{r['name']}:\n{r['autotune']}")
    if "gpt2" in names:
        missed += gpt2_memory(opt, run)
    if missed:
        print("scale.py: MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
