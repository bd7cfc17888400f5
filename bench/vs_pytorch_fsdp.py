#!/usr/bin/env python3
"""PyTorch FSDP and fsdp-run side by side, in one run (issue 38.4).

The same model (Hugging Face GPT-2 124M-shaped and a Llama-shaped model,
float32, dropout 0, random initialisation from one seed), the same data
(random tokens, the same rows for each rank at each step), AdamW with the
same hyper-parameters, full-shard over 2 processes on this machine's CPU,
one thread each:

  pytorch  torch 2.x's FSDP2 (`fully_shard` on each decoder layer, then the
           root; reshard after forward, its default) over Gloo, launched by
           torch 2.x's torchrun;
  fsdp     the model traced (fsdp_trace), planned by fsdp-opt (a unit per
           decoder layer by class, reshard after forward but the root) and
           run by fsdp-run over Gloo under the same torch 2.x torchrun.

Prints per model: the median step time (steps after the first), each
rank's peak resident set (ru_maxrss), the losses of both at every step and
their largest relative difference, and fsdp-opt's predicted peak against
fsdp-run's measured peak (stored state + arena high water) and against
both peak RSS. `--json FILE`: per model an object with `fsdp` and
`pytorch` (each `step_ms`, `peak_rss_bytes` [per rank], `losses`) and
`predicted_peak_bytes`.

    /opt/fsdp/torch2/bin/python bench/vs_pytorch_fsdp.py \\
        --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPT = dict(lr=3e-4, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)


def build(name, dtype=None):
    """(model in training mode, its decoder layers, vocab) from one seed."""
    import torch
    import transformers as t
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = t.GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257,
                           n_positions=1024, attn_pdrop=0.0, resid_pdrop=0.0,
                           embd_pdrop=0.0, use_cache=False)
        m = t.GPT2LMHeadModel(cfg)
        layers = list(m.transformer.h)
    elif name == "llama":
        cfg = t.LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                            num_attention_heads=12, num_key_value_heads=4, vocab_size=32000,
                            max_position_embeddings=2048, use_cache=False)
        m = t.LlamaForCausalLM(cfg)
        layers = list(m.model.layers)
    else:
        raise SystemExit(f"unknown model {name}")
    m.train()
    return m, layers, cfg.vocab_size


def causal_lm_loss(logits, labels):
    from transformers.loss.loss_utils import LOSS_MAPPING
    return LOSS_MAPPING["ForCausalLM"](logits, labels, vocab_size=logits.shape[-1])


def tokens(vocab, rows, seq):
    import torch
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, (rows, seq), generator=g)


def rows_for(step, rank, world, local, total):
    """The rows fsdp-run's .npz reader gives `rank` at `step`."""
    return [((step * world + rank) * local + b) % total for b in range(local)]


# ------------------------------------------------------------------ PyTorch FSDP2
def worker(a):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    from fsdp2 import finish, shard, train_step
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, layers, vocab = build(a.model)
    shard(model, layers, world)
    opt = torch.optim.AdamW(model.parameters(), lr=OPT["lr"],
                            betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"],
                            weight_decay=OPT["weight_decay"])
    data = tokens(vocab, a.batch * a.steps, a.seq)
    local = a.batch // world
    losses, times = [], []
    for step in range(a.steps):
        ids = data[rows_for(step, rank, world, local, len(data))]
        start = time.perf_counter()
        losses.append(train_step(model, opt, ids, causal_lm_loss, world))
        times.append((time.perf_counter() - start) * 1e3)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024],
                       dtype=torch.int64)
    every = [torch.zeros_like(rss) for _ in range(world)]
    dist.all_gather(every, rss)
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump({"step_ms": times, "losses": losses,
                       "peak_rss_bytes": [int(r) for r in every]}, f)
    finish()


def run_pytorch(a, model, tmp):
    out = os.path.join(tmp, f"{model}.pytorch.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(a.port), os.path.abspath(__file__), "--worker",
           "--model", model, "--steps", str(a.steps), "--seq", str(a.seq),
           "--batch", str(a.batch), "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"PyTorch FSDP ({model}) failed:\n{r.stderr[-3000:]}")
    return json.load(open(out))


# ------------------------------------------------------------------ fsdp-run
def rank_rss(argv):
    """--rank-rss OUT -- CMD...: runs CMD, writes its peak RSS (bytes) to
    OUT.<RANK>; exits with its status."""
    out, cmd = argv[0], argv[2:]
    r = subprocess.run(cmd)
    with open(f"{out}.{os.environ.get('RANK', '0')}", "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
    return r.returncode


def run_fsdp(a, model, tmp):
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import fsdp_trace
    from zoo_hf import Logits
    m, layers, vocab = build(model)
    local = a.batch // 2
    data = tokens(vocab, a.batch * a.steps, a.seq)
    base = os.path.join(tmp, model)
    t0 = time.time()
    fsdp_trace.trace(Logits(m), {"input_ids": data[:local], "target": data[:local]},
                     loss_fn=causal_lm_loss).save(base + ".mlir")
    traced_s = time.time() - t0
    np.savez(base + ".npz", input_ids=data.numpy(), target=data.numpy())
    layer_class = type(layers[0]).__name__
    plan = base + ".plan"
    subprocess.run([a.fsdp_opt, base + ".mlir", "--world-size", "2", "--strategy",
                    "full-shard", f"--wrap=class:{layer_class}", "-o", plan,
                    f"--lr={OPT['lr']}", f"--beta1={OPT['beta1']}", f"--beta2={OPT['beta2']}",
                    f"--eps={OPT['eps']}", f"--weight-decay={OPT['weight_decay']}"],
                   check=True, capture_output=True, text=True)
    predicted = json.load(open(plan))["predicted"]["peak_bytes"]
    log = base + ".jsonl"
    # `--` ends torchrun's options (its parser would take --log for --log-dir).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(a.port), "--no-python", "--", sys.executable,
           os.path.abspath(__file__), "--rank-rss", base + ".rss", "--", a.fsdp_run, plan,
           "--data", base + ".npz", "--steps", str(a.steps), "--log", log, "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"fsdp-run ({model}) failed:\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}")
    lines = [json.loads(x) for x in open(log)]
    return {"step_ms": [x["step_ms"] for x in lines], "losses": [x["loss"] for x in lines],
            "peak_rss_bytes": [int(open(f"{base}.rss.{k}").read()) for k in range(2)],
            # Stored state plus the highest arena byte a step wrote (fsdp-run
            # fills the arena with a pattern and scans it), as fsdp-run's
            # measured trace reports it; the RSS adds the process's baseline.
            "measured_peak_bytes": max(x["peak_bytes"] - x["arena_bytes"] + x["arena_high_water"]
                                       for x in lines),
            "trace_s": traced_s}, predicted


def steady(ms):
    return statistics.median(ms[1:] if len(ms) > 1 else ms)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank-rss":
        return rank_rss(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", default=os.path.join(ROOT, "build", "tools", "fsdp-opt"))
    ap.add_argument("--fsdp-run", default=os.path.join(ROOT, "build", "tools", "fsdp-run"))
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4, help="global batch (2 ranks)")
    ap.add_argument("--port", type=int, default=27731)
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--model")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    import torch
    print(f"PyTorch {torch.__version__} FSDP2 (fully_shard, Gloo, CPU) against fsdp-run; "
          f"2 processes x 1 thread, global batch {a.batch}, T={a.seq}, {a.steps} steps",
          flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            fsdp, predicted = run_fsdp(a, model, tmp)
            pt = run_pytorch(a, model, tmp)
            diff = max(abs(x - y) / max(abs(y), 1e-12)
                       for x, y in zip(fsdp["losses"], pt["losses"]))
            results[model] = {"fsdp": {k: fsdp[k] for k in ("step_ms", "peak_rss_bytes",
                                                             "losses")},
                              "pytorch": pt, "predicted_peak_bytes": predicted,
                              "fsdp_measured_peak_bytes": fsdp["measured_peak_bytes"],
                              "fsdp_trace_seconds": fsdp["trace_s"],
                              "loss_max_rel_diff": diff}
            mib = 2.0 ** 20
            fs, ps = steady(fsdp["step_ms"]), steady(pt["step_ms"])
            print(f"\n{model}")
            print(f"  {'':24s} {'fsdp-run':>14s} {'PyTorch FSDP2':>14s}")
            print(f"  {'step (median, ms)':24s} {fs:14.0f} {ps:14.0f}   ratio {fs / ps:.2f}")
            for k in range(2):
                print(f"  {'peak RSS rank %d (MiB)' % k:24s} "
                      f"{fsdp['peak_rss_bytes'][k] / mib:14.0f} "
                      f"{pt['peak_rss_bytes'][k] / mib:14.0f}")
            for s, (x, y) in enumerate(zip(fsdp["losses"], pt["losses"])):
                print(f"  {'loss step %d' % (s + 1):24s} {x:14.6f} {y:14.6f}")
            print(f"  losses: largest relative difference {diff:.1e}")
            m = fsdp["measured_peak_bytes"]
            print(f"  predicted peak {predicted / mib:.1f} MiB: fsdp-run's measured "
                  f"{m / mib:.1f} MiB ({100 * (predicted - m) / m:+.1f}%); peak RSS "
                  f"fsdp-run {max(fsdp['peak_rss_bytes']) / mib:.0f} MiB, PyTorch "
                  f"{max(pt['peak_rss_bytes']) / mib:.0f} MiB", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
