"""Integer arithmetic a step computes, exact against PyTorch.

Models compute positions and indices in int64: a position modulo a
length (`%`), a floor division, a distance's sign and size (`-x`,
`abs`), a hash of an id modulo a table's size. The kernels compute the
binary ops of two int64 tensors in int64, exactly (wrapping past 2^63, as
PyTorch), and integer sums and maxima reduce in int64; the tracer writes
floor division and remainders from a truncating int64 division
(decompose/elementwise.py, integer_division). A value off by one is a
wrong index with exit 0, so this suite compares every value exactly,
where OpInfo's samples (no float output) are skipped, and past 2^53,
where a double (the kernels' mixed path) rounds.

The module reads two int64 step inputs a and b and returns the results,
cast to float, times a parameter of ones: the gradient fsdp-run dumps for
that parameter is the results themselves. a spans |a| < 2^23 and, on half
its elements, 2^24 <= |a| < 2^26, where float32 no longer holds a exactly
and its quotient alone is off by one; b spans 4 <= |b| < 50, both signs.

    integer_ops.py --fsdp-opt build/tools/fsdp-opt --fsdp-run build/tools/fsdp-run
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import bounded  # noqa: E402  (subprocess.run with a deadline)
import fsdp_trace  # noqa: E402
from parity import read_safetensors  # noqa: E402

N = 4096
RESULTS = {  # name -> f(a, b)
    "a % b": lambda a, b: a % b,
    "fmod(a, b)": torch.fmod,
    "div(a, b, floor)": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div(a, b, trunc)": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "a // b": lambda a, b: a // b,
    "a % 7": lambda a, b: a % 7,
    "(-a) % 5": lambda a, b: (-a) % 5,
    "abs(a) % 4": lambda a, b: torch.abs(a) % 4,
    # amin of integers (b, and b's neighbour): reduce_max takes floats.
    "amin(b, b.roll(1))": lambda a, b: torch.stack([b, b.roll(1)]).amin(0),
    # Reductions of integers past float32's 2^24 (a hash, a large count),
    # brought back to b's size by an exact int64 subtraction: in float32
    # every 2^40 + b is 2^40.
    "sum(rows of b + 2^40) - 64*2^40": lambda a, b: _rows(
        (b + 2**40).view(64, 64).sum(1, keepdim=True) - 64 * 2**40),
    "sum(b + 2^40) - 2^52": lambda a, b: ((b + 2**40).sum() - N * 2**40).expand(N),
    "amax(rows of b + 2^40) - 2^40": lambda a, b: _rows(
        (b + 2**40).view(64, 64).amax(1, keepdim=True) - 2**40),
    "amin(rows of b - 2^40) + 2^40": lambda a, b: _rows(
        (b - 2**40).view(64, 64).amin(1, keepdim=True) + 2**40),
    # Past 2^53: h = a·2^36 + a, a hash-sized value (|h| < 2^62), then
    # brought back to a small range exactly. Through double each would be
    # off: h rounds by up to 2^9, and h < h + 1 is false there.
    "h % b": lambda a, b: _hash(a) % b,
    "(h // b) % 1000003": lambda a, b: (_hash(a) // b) % 1000003,
    "fmod(h, b)": lambda a, b: torch.fmod(_hash(a), b),
    "h < h + 1": lambda a, b: (_hash(a) < _hash(a) + 1).long(),
    "max(h, h + 1) - h": lambda a, b: torch.maximum(_hash(a), _hash(a) + 1) - _hash(a),
    "3h - 2h - h (wrapping)": lambda a, b: _hash(a) * 3 - _hash(a) * 2 - _hash(a),
    "(h·7 - h·5) // 2 - h": lambda a, b: (_hash(a) * 7 - _hash(a) * 5) // 2 - _hash(a),
    "a ** 3 % 1000003 (wrapping)": lambda a, b: (a ** 3) % 1000003,
    # Constants past 2^53 in the plan (a double rounds 2^60 + 1 to 2^60).
    "b + (2^60 + 1) - 2^60": lambda a, b: b + (2**60 + 1) - 2**60,
    "b + (2^60 + i % 64) - 2^60": lambda a, b: b + (2**60 + torch.arange(N) % 64) - 2**60,
    "tril(rows of 2^60 + b) - 2^60 (kept)": lambda a, b: (
        torch.tril(2**60 + b.view(64, 64)) - torch.tril(torch.full((64, 64), 2**60))).reshape(N),
    # Integer matrix products (fsdp.matmul takes floats: a broadcast
    # product summed in int64), past 2^53 and wrapping.
    "(h rows @ (b % 9) rows) % 1000003": lambda a, b: ((_hash(a).view(64, 64) @ (b % 9).view(64, 64))
                                                        % 1000003).reshape(N),
    "(b rows @ b[:64]) (matrix-vector)": lambda a, b: _rows((b.view(64, 64) @ b[:64]).view(64, 1)),
    "-h % 1000003": lambda a, b: (-_hash(a)) % 1000003,
    "abs(h) % 1000003": lambda a, b: _hash(a).abs() % 1000003,
    "sign(a)": lambda a, b: torch.sign(a),
    "h & 1023": lambda a, b: _hash(a) & 1023,
    "(~h) % 1000003": lambda a, b: (~_hash(a)) % 1000003,
    "(h >> 30) % 1000003": lambda a, b: (_hash(a) >> 30) % 1000003,
    "(a << 30) % 1000003": lambda a, b: (a << 30) % 1000003,
    "cumsum(rows of b + 2^40) - 2^40·(i + 1)": lambda a, b: (
        (b + 2**40).view(64, 64).cumsum(1) - 2**40 * torch.arange(1, 65)).reshape(N),
    "sort(rows of h) % 1000003": lambda a, b: _hash(a).view(64, 64).sort(1).values.reshape(N) % 1000003,
    "argsort(rows of h, descending)": lambda a, b: _hash(a).view(64, 64).argsort(
        1, descending=True).reshape(N),
    # Positions of extremes: argmax/argmin (none had a lowering), max/min
    # with a dim (their indices were not written), first of equal values,
    # NaN as the extreme; INT64_MIN's minimum (-x would wrap to itself).
    "argmax(rows of b % 7)": lambda a, b: _rows((b % 7).view(64, 64).argmax(1, keepdim=True)),
    "argmin(rows of h)": lambda a, b: _rows(_hash(a).view(64, 64).argmin(1, keepdim=True)),
    "argmax(rows of float a, NaN at a % 97 == 0)": lambda a, b: _rows(torch.where(
        a % 97 == 0, float("nan"), a.float()).view(64, 64).argmax(1, keepdim=True)),
    "max(rows of b % 5, 1).indices": lambda a, b: _rows(
        (b % 5).view(64, 64).max(1, keepdim=True).indices),
    "min(cols of float b, 0).indices": lambda a, b: (b.float() * 0.5).view(64, 64).min(0).indices.repeat(64),
    "argmin(b with INT64_MIN)": lambda a, b: torch.where(b > 40, -2**63, b).argmin().expand(N),
    "amin(rows of b with INT64_MIN) == INT64_MIN": lambda a, b: _rows(
        (torch.where(b > 40, -2**63, b).view(64, 64).amin(1, keepdim=True) == -2**63).long()),
    "prod(rows of 2^12 + b) % 1000003 (wrapping)": lambda a, b: _rows(
        (b + 2**12).view(64, 64).prod(1, keepdim=True) % 1000003),
    "cumprod(rows of b) % 1000003 (wrapping)": lambda a, b: (
        b.view(64, 64).cumprod(1) % 1000003).reshape(N),
    # Counts by scatter_add into int64 (tokens per expert); index_add of
    # values past 2^53 (the CPU kernel read int64 data as float32).
    "counts of b % 8 per row (scatter_add)": lambda a, b: _rows8(
        torch.zeros(64, 8, dtype=torch.long).scatter_add(1, b.view(64, 64) % 8,
                                                         torch.ones(64, 64, dtype=torch.long))),
    "index_add(h rows) % 1000003": lambda a, b: (torch.zeros(64, 64, dtype=torch.long).index_add(
        0, (b.view(64, 64)[:, 0] % 64), _hash(a).view(64, 64)) % 1000003).reshape(N),
    # Buckets (no lowering before): float values with NaN and ties at the
    # boundaries, int64 past 2^53, and rows of sorted sequences.
    "bucketize(b / 4, NaN at a % 89 == 0)": lambda a, b: torch.bucketize(torch.where(
        a % 89 == 0, float("nan"), b / 4.0), torch.tensor([-10.0, -2.5, 0.0, 1.75, 3.0, 9.0])),
    "bucketize(b / 4, right)": lambda a, b: torch.bucketize(
        b / 4.0, torch.tensor([-10.0, -2.5, 0.0, 1.75, 3.0, 9.0]), right=True),
    "searchsorted(2^60 + k, h-like, side right)": lambda a, b: torch.searchsorted(
        2**60 + torch.arange(-40, 50, 3), 2**60 + b, side="right"),
    "searchsorted(rows of sorted b, b, out_int32)": lambda a, b: torch.searchsorted(
        b.view(64, 64).sort(1).values, b.view(64, 64).roll(1, 0), out_int32=True).reshape(N).long(),
    "topk(rows of 2^40·(b % 5) + i, 64)": lambda a, b: (
        2**40 * (b % 5) + torch.arange(N)).view(64, 64).topk(64, 1).indices.reshape(N),
    # A bucket from log2 (a power of two's exponent): floor and ceil of
    # log2(2^k), k in [-30, 30], are k.
    "floor(log2(2^k))": lambda a, b: torch.log2(torch.pow(2.0, (b % 61 - 30).float())).floor().long(),
    "ceil(log2(2^k))": lambda a, b: torch.log2(torch.pow(2.0, (b % 61 - 30).float())).ceil().long(),
}


def _hash(a):
    """a·2^36 + a: past 2^53 for every |a| >= 2^17."""
    return a * 2**36 + a


def _rows8(per_row):
    """A [64, 8] result as N elements (each row's 8 values repeated)."""
    return per_row.repeat(1, 8).reshape(N)


def _rows(per_row):
    """A [64, 1] result a row of 64 elements as N elements."""
    return per_row.expand(64, 64).reshape(N)


class Results(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(len(RESULTS), N))

    def forward(self, a, b):
        out = torch.stack([f(a, b) for f in RESULTS.values()]).float()
        return (out * self.w).sum()


def operands():
    g = torch.Generator().manual_seed(0)
    sign = lambda n: torch.where(torch.rand(n, generator=g) > 0.5, 1, -1)  # noqa: E731
    a = torch.randint(-2**23, 2**23, (N,), generator=g)
    a[N // 2:] = torch.randint(2**24, 2**26, (N // 2,), generator=g) * sign(N // 2)
    a[:6] = torch.tensor([0, 7, -7, 14, -14, 2**23 - 1])
    b = torch.randint(4, 50, (N,), generator=g) * sign(N)
    b[:6] = 7
    return a, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsdp-opt", required=True)
    ap.add_argument("--fsdp-run", required=True)
    ap.add_argument("--frontend", choices=fsdp_trace.capture_frontends(), default="auto")
    a_ = ap.parse_args()
    a, b = operands()
    want = torch.stack([f(a, b) for f in RESULTS.values()]).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        j = lambda name: os.path.join(tmp, name)  # noqa: E731
        fsdp_trace.trace(Results(), {"a": a, "b": b}, frontend=a_.frontend).save(j("m.mlir"))
        np.savez(j("m.npz"), a=a.numpy(), b=b.numpy())
        for cmd in ([a_.fsdp_opt, j("m.mlir"), "-o", j("m.plan")],
                    [a_.fsdp_run, j("m.plan"), "--data", j("m.npz"), "--steps", "1",
                     "--quiet", "--dump-grads", j("g.safetensors")]):
            r = bounded.run(cmd, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                print(f"{os.path.basename(cmd[0])} failed:\n{r.stderr[-2000:]}")
                return 1
        got = np.asarray(read_safetensors(j("g.safetensors"))["w"]).reshape(want.shape)
    failed = 0
    for i, name in enumerate(RESULTS):
        wrong = np.nonzero(got[i] != want[i])[0]
        if len(wrong):
            k = wrong[0]
            print(f"wrong {name}: {len(wrong)} of {N}, e.g. a={int(a[k])} b={int(b[k])}: "
                  f"{got[i][k]:.0f}, PyTorch {want[i][k]}")
            failed += 1
        else:
            print(f"ok    {name}")
    print(f"integer ops: {len(RESULTS) - failed} of {len(RESULTS)} exact (PyTorch {torch.__version__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
