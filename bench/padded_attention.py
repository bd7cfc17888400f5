#!/usr/bin/env python3
"""A padded batch's attention, fused against unfused.

Fine-tuning batches are padded: transformers' Llama gets an attention_mask
from the data, and PyTorch's scaled_dot_product_attention gives a query whose
every key is masked zeros (its safe softmax), which the tracer writes out
around the softmax. fsdp-opt fuses that form into fsdp.attention
{safe_softmax}; with --no-fuse-attention the plan keeps the [B, H, T, T]
scores, probabilities and their gradients instead. Both plans come from the
same traced model and run the same right-padded batch (labels -100 at the
padding); the bench reports each plan's median step time on one rank, its
predicted peak, and how far apart the two runs' losses are after the
last step.

`--model handwritten` runs attention as hand-written models write it
instead: `scores.masked_fill(~keep, -1e9)` with a causal mask and the
padding mask, on a left-padded batch, whose padding queries then see no
key (PyTorch averages their values there: fsdp.attention
{average_empty_rows}).

Needs PyTorch 2.x with transformers (the torch2 venv):

    sh tests/e2e/with_torch2.sh /opt/fsdp/torch2/bin/python /opt/fsdp/torch2/bin/python \\
        bench/padded_attention.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fsdp_trace  # noqa: E402


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


class HandWritten(torch.nn.Module):
    """A pre-norm decoder whose attention is written out with masked_fill."""

    def __init__(self, vocab, dim, heads, layers):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "ln1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim),
            "o": torch.nn.Linear(dim, dim), "ln2": torch.nn.LayerNorm(dim),
            "up": torch.nn.Linear(dim, 4 * dim), "down": torch.nn.Linear(4 * dim, dim)})
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, attention_mask):
        B, T = input_ids.shape
        x = self.embed(input_ids)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        keep = causal[None, None] & attention_mask.bool()[:, None, None, :]
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).view(B, T, 3, self.heads, -1).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
            att = att.masked_fill(~keep, -1e9).softmax(dim=-1)
            x = x + blk["o"]((att @ v).transpose(1, 2).reshape(B, T, -1))
            x = x + blk["down"](torch.nn.functional.gelu(blk["up"](blk["ln2"](x))))
        return self.head(self.norm(x))


def loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                             ignore_index=-100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--model", choices=("llama", "handwritten"), default="llama",
                    help="transformers' Llama (SDPA, right padding) or attention "
                         "written with masked_fill(-1e9) (left padding)")
    a = ap.parse_args()

    torch.manual_seed(0)
    if a.model == "llama":
        import transformers
        cfg = transformers.LlamaConfig(vocab_size=a.vocab, hidden_size=a.dim,
                                       intermediate_size=4 * a.dim, num_hidden_layers=a.layers,
                                       num_attention_heads=a.heads,
                                       num_key_value_heads=a.heads // 2,
                                       max_position_embeddings=a.seq, use_cache=False)
        model = Logits(transformers.LlamaForCausalLM(cfg)).train()
    else:
        model = HandWritten(a.vocab, a.dim, a.heads, a.layers).train()
    g = torch.Generator().manual_seed(1)
    # Each row at least half full; padded on the right (Llama) or left.
    lengths = torch.randint(a.seq // 2, a.seq + 1, (a.batch,), generator=g)
    mask = (torch.arange(a.seq)[None, :] < lengths[:, None]).long()
    if a.model == "handwritten":
        mask = mask.flip(1)
    ids = torch.randint(1, a.vocab, (a.batch, a.seq), generator=g) * mask
    labels = torch.where(mask.bool(), torch.randint(0, a.vocab, ids.shape, generator=g), -100)

    with tempfile.TemporaryDirectory() as tmp:
        mlir = os.path.join(tmp, "model.mlir")
        fsdp_trace.trace(model, {"input_ids": ids, "attention_mask": mask, "target": labels},
                         loss_fn=loss, train=True, frontend="export").save(mlir)
        npz = os.path.join(tmp, "batch.npz")
        np.savez(npz, input_ids=ids.numpy(), attention_mask=mask.numpy(), target=labels.numpy())
        rows = []
        for name, flags in (("fused", []), ("unfused", ["--no-fuse-attention"])):
            plan = os.path.join(tmp, name + ".plan")
            subprocess.run([a.fsdp_opt, mlir, "-o", plan] + flags, check=True,
                           stderr=subprocess.DEVNULL)
            p = json.load(open(plan))
            fused = sum(1 for i in p["program"] if i["op"] == "attention")
            log = os.path.join(tmp, name + ".jsonl")
            subprocess.run([a.fsdp_run, plan, "--data", npz, "--steps",
                            str(a.warmup + a.steps), "--log", log, "--quiet"], check=True)
            steps = [json.loads(line) for line in open(log)]
            rows.append((name, fused, statistics.median(s["step_ms"] for s in steps[a.warmup:]),
                         p["predicted"]["peak_bytes"], steps[-1]["loss"]))
    print(f"{'Llama' if a.model == 'llama' else 'hand-written masked_fill decoder'} "
          f"d={a.dim}, {a.layers} layers, {a.heads} heads, T={a.seq}, batch {a.batch}, "
          f"rows of {', '.join(str(int(n)) for n in lengths)} tokens "
          f"({'right' if a.model == 'llama' else 'left'}-padded); one rank, "
          f"median of {a.steps} steps after {a.warmup}:")
    for name, fused, ms, peak, last in rows:
        print(f"  {name:8s} {fused} of {a.layers} attentions fused: {ms:8.1f} ms a step, "
              f"predicted peak {peak / 2**20:7.1f} MiB, last loss {last:.6f}")
    (_, _, fast, pf, lf), (_, _, slow, pu, lu) = rows
    print(f"  fused/unfused step time {fast / slow:.2f}, peak {pf / pu:.2f}; "
          f"last losses {abs(lf - lu):.1e} apart")


if __name__ == "__main__":
    main()
