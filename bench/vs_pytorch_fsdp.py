#!/usr/bin/env python3
"""PyTorch FSDP and fsdp-run side by side, in one run (issue 38.4).

The same model (Hugging Face GPT-2 124M-shaped and a Llama-shaped model,
float32, dropout 0, random initialisation from one seed), the same data
(random tokens, the same rows for each rank at each step), AdamW with the
same hyper-parameters, full-shard over 2 processes on this machine's CPU,
each on --threads threads (default: half this machine's cores), set and
printed for both sides:

  pytorch  torch 2.x's FSDP2 as its users run it: the model built on the
           meta device, `fully_shard` on each decoder layer, then the root
           (reshard after forward, its default), each rank's shards then
           allocated and read from the initial weights' safetensors file
           (as a checkpoint is loaded); AdamW with fused=True (torchtitan's
           default); torch.set_num_threads(--threads); over Gloo (TCP),
           launched by torch 2.x's torchrun;
  fsdp     the model traced (fsdp_trace), planned by fsdp-opt (a unit per
           decoder layer by class, reshard after forward but the root) and
           run by fsdp-run --threads over Gloo under the same torch 2.x
           torchrun: once with its shared-memory channel between the ranks
           (the default on one host) and once over Gloo's TCP alone (the
           ranks cannot open /dev/shm: tests/e2e/no_shm.sh, which needs
           root; skipped otherwise), as PyTorch's Gloo runs.

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
    """(model in training mode, its decoder layers, vocab) from one seed
    (under `with torch.device("meta")`, shapes only)."""
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
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with torch.device("meta"):
        model, layers, vocab = build(a.model)
    shard(model, layers, world)
    model.to_empty(device="cpu")
    load_shards(model, a.weights, rank, world)
    opt = torch.optim.AdamW(model.parameters(), lr=OPT["lr"],
                            betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"],
                            weight_decay=OPT["weight_decay"], fused=True)
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


def load_shards(model, path, rank, world):
    """Each parameter's local shard (FSDP2 shards dim 0 as torch.chunk
    does) read from the safetensors file at `path`, only its own rows; the
    buffers (rotary tables: not in a checkpoint, computed at construction)
    whole."""
    import math
    import torch
    from safetensors import safe_open
    with torch.no_grad(), safe_open(path, "pt") as f:
        for name, p in model.named_parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            if local.numel() == 0:
                continue
            rows = f.get_slice(name).get_shape()[0]
            start = rank * math.ceil(rows / world) if local.shape != p.shape else 0
            local.copy_(f.get_slice(name)[start:start + local.shape[0]])
        for name, b in model.named_buffers():
            b.copy_(f.get_tensor(name))


def save_initial(m, path):
    """The seed-built model's parameters and buffers, for both sides."""
    from safetensors.torch import save_file
    state = {n: p.detach().clone().contiguous() for n, p in m.named_parameters()}
    state.update({n: b.detach().clone().contiguous() for n, b in m.named_buffers()})
    save_file(state, path)


def run_pytorch(a, model, tmp, weights):
    out = os.path.join(tmp, f"{model}.pytorch.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(a.port), os.path.abspath(__file__), "--worker",
           "--model", model, "--steps", str(a.steps), "--seq", str(a.seq),
           "--batch", str(a.batch), "--out", out, "--threads", str(a.threads),
           "--weights", weights]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                       env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
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
    save_initial(m, os.path.join(tmp, model + ".initial.safetensors"))
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
    runs = {}
    for transport in ("shm", "tcp"):
        if transport == "tcp" and os.geteuid() != 0:
            print("  (fsdp-run over TCP skipped: tests/e2e/no_shm.sh needs root)")
            continue
        runs[transport] = run_fsdp_plan(a, model, base, plan, transport, traced_s)
    return runs, predicted


def run_fsdp_plan(a, model, base, plan, transport, traced_s):
    log = base + f".{transport}.jsonl"
    wrap = [] if transport == "shm" else \
        ["sh", os.path.join(ROOT, "tests", "e2e", "no_shm.sh"), "all"]
    # `--` ends torchrun's options (its parser would take --log for --log-dir).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(a.port), "--no-python", "--", sys.executable,
           os.path.abspath(__file__), "--rank-rss", base + ".rss", "--"] + wrap + [
           a.fsdp_run, plan, "--data", base + ".npz", "--steps", str(a.steps), "--log", log,
           "--quiet", "--threads", str(a.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"fsdp-run ({model}, {transport}) failed:\n{r.stdout[-1500:]}\n"
                         f"{r.stderr[-3000:]}")
    lines = [json.loads(x) for x in open(log)]
    return {"step_ms": [x["step_ms"] for x in lines], "losses": [x["loss"] for x in lines],
            "peak_rss_bytes": [int(open(f"{base}.rss.{k}").read()) for k in range(2)],
            # Stored state plus the highest arena byte a step wrote (fsdp-run
            # fills the arena with a pattern and scans it), as fsdp-run's
            # measured trace reports it; the RSS adds the process's baseline.
            "measured_peak_bytes": max(x["peak_bytes"] - x["arena_bytes"] + x["arena_high_water"]
                                       for x in lines),
            "trace_s": traced_s}


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
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                    help="threads per process, both sides (default: half the cores)")
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--model")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    import torch
    print(f"PyTorch {torch.__version__} FSDP2 (fully_shard, meta-device init, fused AdamW, "
          f"Gloo over TCP) against fsdp-run (Gloo; shared memory and TCP); 2 processes x "
          f"{a.threads} thread{'s' if a.threads > 1 else ''} each (fsdp-run --threads "
          f"{a.threads}; torch.set_num_threads({a.threads})) on {os.cpu_count()} cores; "
          f"global batch {a.batch}, T={a.seq}, {a.steps} steps", flush=True)
    results = {}
    mib = 2.0 ** 20
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            runs, predicted = run_fsdp(a, model, tmp)
            pt = run_pytorch(a, model, tmp, os.path.join(tmp, model + ".initial.safetensors"))
            ps = steady(pt["step_ms"])
            results[model] = {"pytorch": pt, "predicted_peak_bytes": predicted}
            print(f"\n{model}")
            names = [f"fsdp-run {t}" for t in runs] + ["PyTorch FSDP2"]
            print(f"  {'':24s} " + " ".join(f"{n:>16s}" for n in names))
            cols = list(runs.values()) + [pt]
            print(f"  {'step (median, ms)':24s} " +
                  " ".join(f"{steady(c['step_ms']):16.0f}" for c in cols))
            print(f"  {'against PyTorch':24s} " +
                  " ".join(f"{steady(c['step_ms']) / ps:15.2f}x" for c in cols))
            for k in range(2):
                print(f"  {'peak RSS rank %d (MiB)' % k:24s} " +
                      " ".join(f"{c['peak_rss_bytes'][k] / mib:16.0f}" for c in cols))
            for s_ in range(a.steps):
                print(f"  {'loss step %d' % (s_ + 1):24s} " +
                      " ".join(f"{c['losses'][s_]:16.6f}" for c in cols))
            for t, fsdp in runs.items():
                diff = max(abs(x - y) / max(abs(y), 1e-12)
                           for x, y in zip(fsdp["losses"], pt["losses"]))
                m = fsdp["measured_peak_bytes"]
                results[model]["fsdp_" + t] = {
                    k: fsdp[k] for k in ("step_ms", "peak_rss_bytes", "losses",
                                         "measured_peak_bytes", "trace_s")}
                results[model]["fsdp_" + t]["loss_max_rel_diff"] = diff
                print(f"  fsdp-run {t}: losses within {diff:.1e} of PyTorch's; predicted "
                      f"peak {predicted / mib:.1f} MiB against its measured {m / mib:.1f} MiB "
                      f"({100 * (predicted - m) / m:+.1f}%)", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
