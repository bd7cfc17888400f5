"""Every op the tracer lowers, on 0-dim and size-1 operands (issue 35.3).

OpInfo's samples found fsdp-run dying on 0-dim step inputs and fsdp-opt
refusing reductions over dim 0 of a 0-dim tensor, which PyTorch accepts;
the suites had only tried tensors with a batch dimension. Each case here
is a module whose parameters are the operands (0-dim, [1], [1, 1], or
broadcast against them) and whose loss is f(operands) * x, x a 0-dim step
input read from an .npz: traced, compiled, run one step, and its
gradients compared with PyTorch's float64 ones. A case passes when they
agree to 1e-5, or when the front door refuses it with a clear error (exit
1 naming the op); a crash, a hang or a wrong gradient fails the suite.

    shape_edges.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import os
import subprocess
import bounded  # subprocess.run with a deadline
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

S, V1, M11 = (), (1,), (1, 1)
pos = lambda t: t * t + 1  # noqa: E731 (a positive operand)

# name -> (shapes of the parameters, f(*params) -> tensor)
CASES = {
    "abs": ([S], lambda a: a.abs()), "exp": ([S], torch.exp),
    "log": ([S], lambda a: torch.log(pos(a))), "sqrt": ([V1], lambda a: torch.sqrt(pos(a))),
    "rsqrt": ([S], lambda a: torch.rsqrt(pos(a))), "tanh": ([M11], torch.tanh),
    "sigmoid": ([S], torch.sigmoid), "relu": ([S], lambda a: F.relu(a + 3)),
    "gelu": ([S], F.gelu), "gelu-tanh": ([V1], lambda a: F.gelu(a, approximate="tanh")),
    "silu": ([S], F.silu), "erf": ([S], torch.erf), "neg": ([S], torch.neg),
    "reciprocal": ([S], lambda a: torch.reciprocal(pos(a))), "pow": ([S], lambda a: a ** 3),
    "clamp_min": ([S], lambda a: a.clamp_min(-5.0)), "clamp_max": ([S], lambda a: a.clamp_max(5.0)),
    "add-bcast": ([S, (3,)], lambda a, b: a + b), "sub-bcast": ([(2, 1), S], lambda a, b: a - b),
    "mul-bcast": ([V1, (2, 3)], lambda a, b: a * b), "div": ([S, S], lambda a, b: a / pos(b)),
    "maximum": ([S, V1], torch.maximum), "minimum": ([M11, S], torch.minimum),
    "where": ([S, S], lambda a, b: torch.where(a > b, a, b * 2)),
    "masked_fill": ([V1], lambda a: a.masked_fill(a > 100, 0.0)),
    "sum-dim0": ([S], lambda a: a.sum(dim=0)), "mean-keepdim": ([S], lambda a: a.mean(dim=-1, keepdim=True)),
    "amax": ([S], lambda a: a.amax(0)), "sum-size1": ([M11], lambda a: a.sum(1)),
    "mean-all": ([S], lambda a: a.mean()),
    "softmax-0dim": ([S], lambda a: F.softmax(a, dim=0) * a),
    "log_softmax-size1": ([V1], lambda a: F.log_softmax(a, dim=0) + a),
    "matmul-dot": ([V1, V1], lambda a, b: a @ b), "mm-1x1": ([M11, M11], lambda a, b: a @ b),
    "matmul-vec": ([M11, V1], lambda a, b: a @ b),
    "unsqueeze-0dim": ([S], lambda a: a.unsqueeze(0) * 2), "squeeze": ([M11], lambda a: a.squeeze()),
    "reshape-0dim": ([S], lambda a: a.reshape(1, 1) * 2), "expand-0dim": ([S], lambda a: a.expand(3) * 1.5),
    "transpose-1x1": ([M11], lambda a: a.t() * 3), "cat": ([V1, V1], lambda a, b: torch.cat([a, b * 2])),
    "layer_norm-size1": ([(2, 1), V1, V1], lambda x, w, b: F.layer_norm(x, (1,), w, b)),
    "cross_entropy-1x3": ([(1, 3)], lambda a: F.cross_entropy(a, torch.tensor([1]))),
    "mse-0dim": ([S, S], lambda a, b: F.mse_loss(a, b)),
    "embedding-0dim": ([(4, 2)], lambda w: F.embedding(torch.tensor(2), w)),
    "select-0dim-result": ([(3,)], lambda a: a[1] * 2),
    # The registry's three newest rows (softplus past its threshold of 20,
    # hardswish on both sides of its kinks); softplus with beta != 1 has no
    # one-to-one op and is refused, never dropped.
    "softplus": ([(2, 5)], lambda a: F.softplus(a * 12)),
    "mish": ([S], F.mish), "mish-wide": ([(2, 5)], lambda a: F.mish(a * 4)),
    "hardswish": ([(2, 5)], lambda a: F.hardswish(a * 4)),
    "softplus-beta2": ([S], lambda a: F.softplus(a, beta=2.0)),
}


class Case(nn.Module):
    def __init__(self, shapes, fn, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(s, generator=g) + 0.3)
                                    for s in shapes])
        self.fn = fn

    def forward(self, x):
        return (self.fn(*self.ps) * x).sum()


def run_case(name, shapes, fn, tools, tmp):
    module = Case(shapes, fn, seed=len(name))
    x = torch.tensor(1.25)
    base = os.path.join(tmp, name)
    try:
        fsdp_trace.trace(module, {"x": x}).save(base + ".mlir")
    except fsdp_trace.TraceError as e:
        return "refused (tracer)", str(e).splitlines()[0]
    np.savez(base + ".npz", x=x.numpy())
    r = bounded.run([tools[0], base + ".mlir", "-o", base + ".plan"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        why = [l for l in r.stderr.splitlines() if "error" in l][:1]
        return ("refused (fsdp-opt)" if r.returncode == 1 else f"FAIL fsdp-opt exit {r.returncode}",
                why[0] if why else r.stderr[-200:])
    ref = Case(shapes, fn, seed=len(name)).double()
    loss = ref(x.double())
    loss.backward()
    worst = 0.0
    # The CPU backend's gradients against PyTorch; then the device lowering
    # run on the host (--backend emulated: the CUDA backend's kernels and
    # memory plan, without a GPU) must end the step where the CPU does.
    weights = {}
    for backend in ("cpu", "emulated"):
        extra = ["--dump-grads", base + ".grads.safetensors"] if backend == "cpu" else []
        r = bounded.run([tools[1], base + ".plan", "--data", base + ".npz", "--steps", "1",
                         "--backend", backend, "--save-full", f"{base}.{backend}.safetensors",
                         "--quiet"] + extra, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return f"FAIL fsdp-run ({backend}) exit {r.returncode}", r.stderr.strip()[-300:]
        weights[backend] = read_safetensors(f"{base}.{backend}.safetensors")
    worst = compare(ref, read_safetensors(base + ".grads.safetensors"))
    if isinstance(worst, str):
        return "FAIL", worst
    if not worst <= 1e-5:
        return "FAIL wrong gradient", f"relative error {worst:.3g}"
    for key, w in weights["cpu"].items():
        e = weights["emulated"].get(key)
        if e is None or not np.allclose(e, w, rtol=1e-5, atol=1e-7):
            return "FAIL emulated device", f"{key} after one step differs from the CPU's"
    return "ok", f"gradient within {worst:.1e}; the emulated device's step agrees"


def compare(ref, ours):
    """The worst relative gradient error against the float64 module `ref`,
    or what is missing."""
    worst = 0.0
    for i, p in enumerate(ref.ps):
        key = f"ps.{i}"
        if p.grad is None:
            continue
        if key not in ours:
            return f"no gradient for {key}"
        g = np.asarray(ours[key], np.float64).reshape(p.grad.shape)
        t = p.grad.numpy()
        worst = max(worst, float(np.abs(g - t).max() / max(np.abs(t).max(), 1e-6)))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    counts = {}
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.cases:
            shapes, fn = CASES[name]
            verdict, detail = run_case(name, shapes, fn, (a.fsdp_opt, a.fsdp_run), tmp)
            kind = verdict.split(" ")[0]
            counts[kind] = counts.get(kind, 0) + 1
            print(f"{verdict:22s} {name:22s} {detail}")
            if kind == "FAIL":
                failed.append(name)
    print("shape edges: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
