#!/usr/bin/env python3
"""Checkpoints PyTorch wrote and checkpoints PyTorch reads (issue 38.5).

A small Llama (transformers' LlamaForCausalLM: GQA, RoPE, untied head),
AdamW, float32, the same data rows for each rank at each step as fsdp-run's
.npz reader gives them. Both ways, across world sizes:

  torch -> fsdp  PyTorch FSDP2 (fully_shard per decoder layer, Gloo, CPU)
                 on W1 ranks trains 2 steps and saves with DCP; the
                 checkpoint goes through `python -m fsdp_checkpoint
                 from-dcp`; fsdp-run on W2 ranks resumes it for steps 3-4.
                 Its losses must equal PyTorch's own steps 3-4 (FSDP2 on W1
                 going on).
  fsdp -> torch  fsdp-run on W1 ranks trains 4 steps with a checkpoint at
                 step 2; `to-dcp` writes it as DCP; an FSDP2 model on W2
                 ranks `dcp.load`s it and trains steps 3-4: its losses must
                 equal fsdp-run's steps 3-4.

for (W1, W2) = (2, 1) and (1, 2). Losses agree within float32 rounding
(relative 1e-5: two implementations' sums in different orders). PyTorch
runs under torch 2.x's torchrun, fsdp-run under mpirun.

    /opt/fsdp/torch2/bin/python tests/e2e/dcp_roundtrip.py \\
        --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
BATCH, T, STEPS, SAVE_AT = 4, 16, 4, 2
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 1e-8, 0.1
TOLERANCE = 1e-5


def build():
    import torch
    import transformers as t
    torch.manual_seed(0)
    cfg = t.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=64, tie_word_embeddings=False,
                        use_cache=False)
    m = t.LlamaForCausalLM(cfg)
    m.train()
    return m


def loss_fn(logits, labels):
    from transformers.loss.loss_utils import LOSS_MAPPING
    return LOSS_MAPPING["ForCausalLM"](logits, labels, vocab_size=logits.shape[-1])


def data():
    import torch
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 128, (BATCH * STEPS, T), generator=g)


def rows(step, rank, world, total):
    local = BATCH // world
    return [((step * world + rank) * local + b) % total for b in range(local)]


# -------------------------------------------------------------- PyTorch FSDP2
def worker(a):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from fsdp2 import finish, shard, train_step
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build()
    shard(model, model.model.layers, world)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    start = 0
    if a.load:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=a.load)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        start = SAVE_AT
    tokens = data()
    losses = []
    for step in range(start, STEPS):
        ids = tokens[rows(step, rank, world, len(tokens))]
        losses.append(train_step(model, opt, ids, loss_fn, world))
        if a.save and step + 1 == SAVE_AT:
            msd, osd = get_state_dict(model, opt)
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=a.save)
    if a.dump:
        from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                             get_model_state_dict)
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                    cpu_offload=True))
        if rank == 0:
            torch.save(full, a.dump)
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(losses, f)
    finish()


def torch_run(world, out, load=None, save=None, port=26741, dump=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
           "--master-port", str(port), os.path.abspath(__file__), "--worker", "--out", out]
    cmd += ["--load", load] if load else []
    cmd += ["--save", save] if save else []
    cmd += ["--dump", dump] if dump else []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"PyTorch FSDP2 on {world} rank(s) failed:\n{r.stderr[-3000:]}")
    return json.load(open(out))


# -------------------------------------------------------------- fsdp-run
def plan_for(a, world, tmp):
    import numpy as np
    import torch
    import fsdp_trace
    base = os.path.join(tmp, f"llama{world}")
    m = build()

    class AsModel(torch.nn.Module):
        """LlamaForCausalLM's logits, its state named as its state_dict
        (the model's children registered here as they are there)."""

        def __init__(self):
            super().__init__()
            for name, child in m.named_children():
                self.add_module(name, child)

        def forward(self, input_ids):
            return m(input_ids=input_ids).logits
    tokens = data()
    local = BATCH // world
    fsdp_trace.trace(AsModel(), {"input_ids": tokens[:local], "target": tokens[:local]},
                     loss_fn=loss_fn).save(base + ".mlir")
    np.savez(os.path.join(tmp, "data.npz"), input_ids=tokens.numpy(), target=tokens.numpy())
    subprocess.run([a.fsdp_opt, base + ".mlir", "--world-size", str(world), "-o",
                    base + ".plan", "--wrap=class:LlamaDecoderLayer", f"--lr={LR}",
                    f"--beta1={BETAS[0]}", f"--beta2={BETAS[1]}", f"--eps={EPS}",
                    f"--weight-decay={WD}"], check=True, capture_output=True)
    return base + ".plan"


def fsdp_run(a, plan, world, tmp, extra):
    log = os.path.join(tmp, f"fsdp{world}.{len(extra)}.jsonl")
    argv = [a.fsdp_run, plan, "--data", os.path.join(tmp, "data.npz"), "--steps", str(STEPS),
            "--quiet", "--log", log] + extra
    cmd = MPIRUN + ["-np", str(world)] + argv if world > 1 else argv
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"fsdp-run on {world} rank(s) failed:\n{r.stderr[-3000:]}")
    return [json.loads(x)["loss"] for x in open(log)]


def convert(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-m", "fsdp_checkpoint"] + list(args),
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"fsdp_checkpoint {args[0]} failed:\n{r.stderr[-3000:]}")


def full_state_dict_check(saved, dumped):
    """'' when the safetensors file loads into a fresh model (strict, but
    for buffers the model does not save) and every tensor is within
    float32 rounding of PyTorch's own final state; else why not."""
    import torch
    from safetensors.torch import load_file
    m = build()
    state = load_file(saved)
    own = set(m.state_dict())
    extra = set(state) - own
    nonpersistent = {f"{p}.{b}" if p else b for p, mod in m.named_modules()
                     for b in mod._non_persistent_buffers_set}
    if extra - nonpersistent:
        return f"unexpected keys {sorted(extra - nonpersistent)[:4]}"
    result = m.load_state_dict({k: v for k, v in state.items() if k in own}, strict=True)
    if result.missing_keys or result.unexpected_keys:
        return f"load_state_dict: {result}"
    ref = torch.load(dumped)
    worst = max(float((state[k] - ref[k]).abs().max() / ref[k].abs().max().clamp_min(1e-6))
                for k in ref if k in state)
    return "" if worst <= 1e-4 else f"weights differ from PyTorch's by {worst:.1e}"


def report(what, got, want):
    """Prints the comparison of the losses after the checkpoint; [what]
    when they differ past float32 rounding, else []."""
    e = max(abs(p - q) / max(abs(q), 1e-12) for p, q in zip(got, want))
    ok = e <= TOLERANCE and len(got) == len(want)
    print(f"{'ok' if ok else 'FAIL':4s} {what}: steps {SAVE_AT + 1}-{STEPS} losses "
          f"{[round(x, 6) for x in got]} vs {[round(x, 6) for x in want]} (rel {e:.1e})",
          flush=True)
    return [] if ok else [what]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt")
    ap.add_argument("--fsdp-run")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--load")
    ap.add_argument("--save")
    ap.add_argument("--dump")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        plans = {w: plan_for(a, w, tmp) for w in (1, 2)}
        data_arg = os.path.join(tmp, "data.npz")
        for w1, w2 in ((2, 1), (1, 2)):
            # PyTorch -> fsdp-run
            d = os.path.join(tmp, f"dcp-{w1}{w2}")
            ref = torch_run(w1, os.path.join(tmp, f"t{w1}.json"), save=d)
            ck = os.path.join(tmp, f"ck-from-dcp-{w1}{w2}")
            convert("from-dcp", d, ck, "--plan", plans[w2], "--data", data_arg)
            ours = fsdp_run(a, plans[w2], w2, tmp, ["--resume", ck])
            failed += report(f"torch FSDP2 x{w1} -> DCP -> fsdp-run x{w2}", ours,
                             ref[SAVE_AT:])
            # fsdp-run -> PyTorch
            cd = os.path.join(tmp, f"ckpt-{w1}{w2}")
            saved = os.path.join(tmp, f"full-{w1}{w2}.safetensors")
            full = fsdp_run(a, plans[w1], w1, tmp, ["--checkpoint-dir", cd,
                                                    "--checkpoint-every", str(SAVE_AT),
                                                    "--save-full", saved])
            d2 = os.path.join(tmp, f"to-dcp-{w1}{w2}")
            convert("to-dcp", os.path.join(cd, f"step-{SAVE_AT}"), d2, "--plan", plans[w1])
            dumped = os.path.join(tmp, f"torch-final-{w1}{w2}.pt")
            theirs = torch_run(w2, os.path.join(tmp, f"l{w1}{w2}.json"), load=d2, dump=dumped)
            failed += report(f"fsdp-run x{w1} -> DCP -> torch FSDP2 x{w2}", theirs,
                             full[SAVE_AT:])
            # fsdp-run's --save-full (after step 4) is a state dict the
            # model's load_state_dict takes, and holds what PyTorch's run
            # from the same step-2 checkpoint holds after step 4.
            why = full_state_dict_check(saved, dumped)
            print(f"{'ok' if not why else 'FAIL':4s} fsdp-run x{w1} --save-full -> "
                  f"load_state_dict: {why or 'loads; weights as torch FSDP2 x%d ends' % w2}",
                  flush=True)
            failed += [f"--save-full x{w1}: {why}"] if why else []
    if failed:
        print("dcp round trips failed: " + ", ".join(failed))
        return 1
    print("dcp round trips: 4 of 4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
