#!/usr/bin/env python3
"""CPU training-step time: fsdp-run against PyTorch 1.13 eager, side by side.

The same GPT-2 (default d=256, 4 layers, 4 heads, T=128, vocab 512, batch
8, tied embeddings, loss in the graph), the same batch, AdamW, the same
thread count (OpenBLAS and torch both pinned to --threads). Reports the
median step time of each over --steps steps after --warmup, and the ratio;
the model FLOP/s (6 x parameters x tokens a step) against this machine's
sgemm peak and copy bandwidth, both measured in the same run (the better of
numpy on Debian's OpenBLAS at 4096^2 and fsdp-run --calibrate's products on
the library it picked, the same threads); the same model's step with
--compute-dtype=bf16; the step each plan predicts (for fsdp-opt's default --device=cpu,
this machine as fsdp-run calibrated it) against the measured one; and
fsdp-run's compute stream by op class from its trace (each instruction's
median over the steps).

    bench/cpu_step.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
    bench/cpu_step.py --dim 768 --layers 12 --heads 12 --seq 256 --vocab 50304 \
        --batch 2 --steps 3 --warmup 1      # GPT-2 124M
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch


# Op classes of the trace table.
CLASSES = {
    "GEMM": {"matmul", "gemm", "conv", "conv_grad_input", "conv_grad_weight"},
    "attention": {"attention", "attention_grad"},
    "losses": {"cross_entropy", "cross_entropy_grad", "cross_entropy_with_grad", "nll_loss",
               "log_softmax", "softmax"},
    "norms": {"layer_norm", "layer_norm_grad", "rms_norm", "rms_norm_grad",
              "batch_norm", "batch_norm_grad"},
    "optimizer": {"adamw", "sgd"},
    "reductions": {"reduce_sum", "reduce_mean", "reduce_max"},
    "data movement": {"transpose", "broadcast", "pack", "reshape", "slice", "concat",
                      "split", "insert_slice", "gather", "scatter_add", "cast"},
}


def machine(threads):
    """sgemm GFLOP/s (numpy, 4096^2) and copy GB/s (torch's copy_ of 256
    MiB, bytes read and written) with `threads`."""
    code = ("import numpy as np, time\n"
            "n = 4096; a = np.random.rand(n, n).astype(np.float32); b = a.copy(); a @ b\n"
            "t = time.perf_counter(); r = 3\n"
            "for _ in range(r): a @ b\n"
            "gemm = 2 * n ** 3 * r / (time.perf_counter() - t) / 1e9\n"
            "import torch; torch.set_num_threads(%d)\n"
            "x = torch.ones(1 << 26); y = torch.empty_like(x); y.copy_(x)\n"
            "t = time.perf_counter()\n"
            "for _ in range(5): y.copy_(x)\n"
            "copy = 2 * 4 * x.numel() * 5 / (time.perf_counter() - t) / 1e9\n"
            "print(gemm, copy)\n" % threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True, env=env,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def op_shares(trace):
    """Compute-stream milliseconds a step by op class: each instruction's
    median over the traced steps (one slow call in the last step, a page
    fault or the OS taking a core, does not move it)."""
    events = json.load(open(trace))["traceEvents"]
    by = {}
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0 or e.get("tid") != 0:
            continue
        name = e["name"].split(" ")[0]
        cls = next((c for c, ops in CLASSES.items() if name in ops), "elementwise")
        dur = e.get("args", {}).get("median_dur", e.get("dur", 0.0))
        by[cls] = by.get(cls, 0.0) + dur / 1000
    return by


# Op classes bound by memory traffic, and the bytes an instruction moves.
MEMORY_BOUND = ("optimizer", "elementwise", "norms", "losses", "reductions")
DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i1": 1}


def moved_bytes(ins):
    def size(t):
        n = 1
        for d in t["shape"]:
            n *= d
        return n * DTYPE_BYTES.get(t["dtype"], 4)
    if ins["op"] == "adamw":  # gradient read; parameter and two moments read and written
        return size(ins["in"][0]) * 7
    return sum(size(t) for t in ins["in"] + ins["out"])


def memory_bound_rate(trace, plan):
    """GB/s of the memory-bound op classes: bytes their instructions read
    and write over their median times."""
    program = json.load(open(plan))["program"]
    events = json.load(open(trace))["traceEvents"]
    moved = seconds = 0.0
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0 or e.get("tid") != 0:
            continue
        name = e["name"].split(" ")[0]
        cls = next((c for c, ops in CLASSES.items() if name in ops), "elementwise")
        index = e.get("args", {}).get("instruction", -1)
        if cls not in MEMORY_BOUND or not 0 <= index < len(program):
            continue
        moved += moved_bytes(program[index])
        seconds += e.get("args", {}).get("median_dur", e.get("dur", 0.0)) / 1e6
    return moved / seconds / 1e9 if seconds else 0.0


def predicted_ms(plan):
    """The step the plan's cost model predicts (milliseconds)."""
    p = json.load(open(plan))["predicted"]
    return 1000 * (p["compute_seconds"] + p["exposed_comm_seconds"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default="build/tools/fsdp-opt")
    ap.add_argument("--fsdp-run", default="build/tools/fsdp-run")
    ap.add_argument("--generator", default="examples/gen_model.py")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    spec = importlib.util.spec_from_file_location("gen_model", a.generator)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    args = gen.parse_args(["gpt2", "--loss", "--dim", str(a.dim), "--layers", str(a.layers),
                           "--heads", str(a.heads), "--seq", str(a.seq), "--vocab",
                           str(a.vocab), "--batch", str(a.batch)])
    model, inputs = gen.build(args)
    total = a.steps + a.warmup
    tokens = a.batch * a.seq
    with tempfile.TemporaryDirectory() as tmp:
        onnx = os.path.join(tmp, "gpt2.onnx")
        torch.onnx.export(model, tuple(inputs.values()), onnx, input_names=list(inputs),
                          output_names=["loss"], opset_version=17, do_constant_folding=False)
        npz = os.path.join(tmp, "batch.npz")
        np.savez(npz, **{n: t.numpy() for n, t in inputs.items()})
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
        # The plans are made for --device=cpu, fsdp-opt's default: this
        # machine as fsdp-run calibrated it (cached; measured first where
        # there is none), so their predicted step can be checked against
        # the run.
        cal_path = subprocess.run([a.fsdp_run, "--calibration=none"], check=True, env=env,
                                  capture_output=True, text=True).stdout.strip()
        cal = json.load(open(cal_path))
        plan = os.path.join(tmp, "gpt2.plan")
        subprocess.run([a.fsdp_opt, onnx, "-o", plan], check=True, env=env,
                       stderr=subprocess.DEVNULL)
        log = os.path.join(tmp, "log.jsonl")
        trace = os.path.join(tmp, "trace.json")
        subprocess.run([a.fsdp_run, plan, "--data", npz, "--steps", str(total), "--log", log,
                        "--trace", trace, "--quiet"], check=True, env=env)
        ours = [json.loads(l)["step_ms"] for l in open(log)][a.warmup:]
        shares = op_shares(trace)
        bound_rate = memory_bound_rate(trace, plan)
        # The same model computing in bf16 (f32 master weights), whose GEMMs
        # run as bf16 where the CPU has AVX512-BF16 or AMX (oneDNN).
        plan16 = os.path.join(tmp, "gpt2-bf16.plan")
        subprocess.run([a.fsdp_opt, onnx, "-o", plan16, "--compute-dtype=bf16"], check=True,
                       env=env, stderr=subprocess.DEVNULL)
        log16 = os.path.join(tmp, "log16.jsonl")
        subprocess.run([a.fsdp_run, plan16, "--data", npz, "--steps", str(total), "--log",
                        log16, "--quiet"], check=True, env=env)
        ours16 = [json.loads(l)["step_ms"] for l in open(log16)][a.warmup:]
        predicted, predicted16 = predicted_ms(plan), predicted_ms(plan16)
    gemm_openblas, copy_bw = machine(a.threads)
    # The peak: the better of numpy's 4096^2 and fsdp-run --calibrate's
    # 1024^2 product (sgemm_peak_f32; flops_f32 is the slower rate of a
    # step's mix of products the cost model uses).
    sgemm_peak = cal.get("sgemm_peak_f32", cal["flops_f32"]) / 1e9
    gemm_peak = max(gemm_openblas, sgemm_peak)

    torch.set_num_threads(a.threads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for s in range(total):
        start = time.perf_counter()
        opt.zero_grad()
        loss = model(*inputs.values())
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1000)
    theirs = times[a.warmup:]
    mo, mt = statistics.median(ours), statistics.median(theirs)
    params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2 d={a.dim} L={a.layers} T={a.seq} B={a.batch} vocab={a.vocab} "
          f"({params / 1e6:.2f} M params), {a.threads} threads, median of {a.steps} steps:")
    print(f"  fsdp-run        {mo:8.1f} ms/step  {tokens / mo * 1000:8.0f} tokens/s")
    print(f"  PyTorch eager   {mt:8.1f} ms/step  {tokens / mt * 1000:8.0f} tokens/s")
    missed = []

    def target(ok, what):
        if not ok:
            missed.append(what)
        return "met" if ok else "MISSED"

    print(f"  ratio fsdp/torch step time: {mo / mt:.2f} (target <= 0.5: "
          f"{target(mo / mt <= 0.5, 'step time <= 0.5x PyTorch')})")
    mo16 = statistics.median(ours16)
    print(f"  fsdp-run bf16   {mo16:8.1f} ms/step  {tokens / mo16 * 1000:8.0f} tokens/s "
          f"(--compute-dtype=bf16; {cal['name']}, bf16 products at "
          f"{cal['flops_bf16'] / 1e9:.0f} GFLOP/s)")
    for what, p, m in (("f32", predicted, mo), ("bf16", predicted16, mo16)):
        print(f"  predicted {what} step (fsdp-opt's default --device=cpu: {cal_path}) "
              f"{p:8.1f} ms against {m:.1f} measured: {100 * (p - m) / m:+.1f}% "
              f"(target within 10%: "
              f"{target(abs(p - m) <= 0.1 * m, f'{what} prediction within 10%')})")
    flops = 6 * params * tokens
    print(f"  model FLOP/s: fsdp-run {flops / mo / 1e6:.1f} GFLOP/s, PyTorch "
          f"{flops / mt / 1e6:.1f}; this machine's sgemm ({a.threads} threads): OpenBLAS "
          f"{gemm_openblas:.1f} GFLOP/s (numpy, 4096^2), fsdp-run's "
          f"{sgemm_peak:.1f} (1024^2), {cal['flops_f32'] / 1e9:.1f} on a step's products; peak {gemm_peak:.1f}: fsdp-run at "
          f"{100 * flops / mo / 1e6 / gemm_peak:.0f}% (target >= 70%: "
          f"{target(flops / mo / 1e6 >= 0.7 * gemm_peak, 'model FLOP/s >= 70% of sgemm')}); "
          f"copy bandwidth "
          f"{copy_bw:.1f} GB/s ({a.threads} threads)")
    print(f"  memory-bound ops ({', '.join(MEMORY_BOUND)}): {bound_rate:.1f} GB/s, "
          f"{100 * bound_rate / copy_bw:.0f}% of the copy bandwidth (target >= 60%: "
          f"{target(bound_rate >= 0.6 * copy_bw, 'memory-bound ops >= 60% of copy')})")
    total_ms = sum(shares.values())
    print(f"  fsdp-run's compute stream (each instruction's median): {total_ms:.1f} ms")
    for cls, ms in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"    {cls:14s} {ms:9.1f} ms  {100 * ms / total_ms:5.1f}%")
    non_gemm = 1 - shares.get('GEMM', 0) / total_ms
    print(f"    non-GEMM share: {100 * non_gemm:.1f}% "
          f"(target <= 20%: {target(non_gemm <= 0.2, 'non-GEMM share <= 20%')}); "
          f"without attention's (its two products a head): "
          f"{100 * (1 - (shares.get('GEMM', 0) + shares.get('attention', 0)) / total_ms):.1f}%")
    if missed:
        print("cpu_step.py: MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
