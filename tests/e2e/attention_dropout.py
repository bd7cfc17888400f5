#!/usr/bin/env python3
"""F.scaled_dot_product_attention with dropout_p > 0, traced (torch 2.x):
the plan drops attention probabilities, as PyTorch does, not outputs.

Uniform attention (q = k = 0 over T keys) on values v (a parameter of
ones [T, D]), loss = Σ out[i0, :]: dL/dv[j, f] is row i0 of the dropped
probabilities, mask_j / ((1 - p) T). So each row j of the gradient must be
constant over the D features (a mask on probabilities; a mask on outputs
would vary over f and not over j), take only the values 0 and 1/((1-p)T),
and be 0 for a fraction of the keys within binomial bounds of p. Also
Hugging Face's GPT-2 with its default dropouts (attention, residual and
embedding 0.1) traces and trains: the loss stays finite and falls.

    /opt/fsdp/torch2/bin/python tests/e2e/attention_dropout.py \\
        --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

T, D, P, ROW = 256, 8, 0.5, 3


class Uniform(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.v = torch.nn.Parameter(torch.ones(1, 1, T, D))

    def forward(self, x):
        q = x * 0  # [1, 1, T, D] zeros that depend on the input
        out = F.scaled_dot_product_attention(q, q, self.v, dropout_p=P)
        return out[0, 0, ROW].sum()


def run(tools, mlir, tmp, extra):
    plan = os.path.join(tmp, "m.plan")
    subprocess.run([tools[0], mlir, "-o", plan], check=True, capture_output=True)
    r = subprocess.run([tools[1], plan, "--quiet"] + extra, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"fsdp-run failed: {r.stderr[-1500:]}")


def probabilities(tools, tmp):
    mlir = os.path.join(tmp, "u.mlir")
    x = torch.randn(1, 1, T, D)
    fsdp_trace.trace(Uniform(), {"x": x}).save(mlir)
    np.savez(os.path.join(tmp, "u.npz"), x=x.numpy())
    grads = os.path.join(tmp, "g.safetensors")
    run(tools, mlir, tmp, ["--data", os.path.join(tmp, "u.npz"), "--steps", "1",
                           "--dump-grads", grads])
    g = np.asarray(read_safetensors(grads)["v"], np.float64).reshape(T, D)
    kept = 1.0 / ((1 - P) * T)
    why = []
    if np.abs(g - g[:, :1]).max() > 1e-9:
        why.append("the gradient varies across features: outputs were dropped, not "
                   "probabilities")
    values = np.unique(np.round(g[:, 0] / kept, 6))
    if not set(values.tolist()) <= {0.0, 1.0}:
        why.append(f"values other than 0 and 1/((1-p)T): {values[:6] * kept}")
    zeros = int((np.abs(g[:, 0]) < kept / 2).sum())
    sigma = math.sqrt(T * P * (1 - P))
    if abs(zeros - T * P) > 4 * sigma:
        why.append(f"{zeros} of {T} keys dropped at p = {P}")
    print(f"{'ok' if not why else 'FAIL'} attention dropout: {zeros}/{T} probabilities "
          f"dropped, kept ones scaled to 1/((1-p)T), one mask per (query, key)"
          + ("" if not why else ": " + "; ".join(why)), flush=True)
    return not why


def gpt2_defaults(tools, tmp):
    import transformers as t
    torch.manual_seed(0)
    cfg = t.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                       use_cache=False)  # dropouts at their defaults (0.1)
    m = t.GPT2LMHeadModel(cfg).train()
    from transformers.loss.loss_utils import LOSS_MAPPING
    from zoo_hf import Logits
    ids = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(1))
    mlir = os.path.join(tmp, "gpt2.mlir")
    fsdp_trace.trace(Logits(m), {"input_ids": ids, "target": ids},
                     loss_fn=lambda lg, y: LOSS_MAPPING["ForCausalLM"](
                         lg, y, vocab_size=lg.shape[-1])).save(mlir)
    np.savez(os.path.join(tmp, "d.npz"), input_ids=ids.numpy(), target=ids.numpy())
    log = os.path.join(tmp, "gpt2.jsonl")
    run(tools, mlir, tmp, ["--data", os.path.join(tmp, "d.npz"), "--steps", "30",
                           "--log", log])
    losses = [json.loads(x)["loss"] for x in open(log)]
    ok = all(math.isfinite(x) for x in losses) and np.mean(losses[-5:]) < np.mean(losses[:5])
    print(f"{'ok' if ok else 'FAIL'} transformers GPT-2, default dropouts: loss "
          f"{losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} steps", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    a = ap.parse_args()
    tools = (a.fsdp_opt, a.fsdp_run)
    with tempfile.TemporaryDirectory() as tmp:
        ok = probabilities(tools, tmp)
        ok = gpt2_defaults(tools, tmp) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
