"""Small modules for traced.test (python3 -m fsdp_trace FILE:FACTORY)."""
import random as pyrandom

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Inner(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Block(nn.Module):
    """A block holding an Inner: nested wrapping."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.inner = Inner(d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        return x + self.out(self.inner(self.norm(x)))


class TwoBlocks(nn.Module):
    """Blocks that are not a numbered family (block_a, block_b)."""

    def __init__(self, d=8, classes=4):
        super().__init__()
        self.block_a = Block(d)
        self.block_b = Block(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.block_b(self.block_a(x)))


def two_blocks():
    torch.manual_seed(0)
    model = TwoBlocks()
    inputs = {"x": torch.randn(2, 8), "targets": torch.tensor([1, 3])}
    return model, inputs, F.cross_entropy


class Scan(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        return torch.special.i0e(self.a(x))


class Unsupported(nn.Module):
    """Ops fsdp has no lowering for, in two modules."""

    def __init__(self):
        super().__init__()
        self.scan = Scan()
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        z = torch.lgamma(torch.tanh(self.b(self.scan(x))))
        return torch.special.i0e(z).sum()


def unsupported():
    return Unsupported(), {"x": torch.randn(2, 4)}


class ComplexMagnitude(nn.Module):
    """A complex op beyond what rotary embeddings use: |z|."""

    def __init__(self):
        super().__init__()
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        z = torch.view_as_complex(self.b(x).reshape(2, 2, 2))
        return z.abs().sum()


def complex_magnitude():
    return ComplexMagnitude(), {"x": torch.randn(2, 4)}


class ComplexWeight(nn.Module):
    """A complex parameter: a plan holds no complex tensor."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, dtype=torch.complex64))

    def forward(self, x):
        return torch.view_as_real(self.w * torch.view_as_complex(x)).sum()


def complex_weight():
    return ComplexWeight(), {"x": torch.randn(4, 2)}


class ComplexInput(nn.Module):
    """A complex input: a plan's inputs are real."""

    def __init__(self):
        super().__init__()
        self.b = nn.Linear(2, 2)

    def forward(self, x):
        return self.b(torch.view_as_real(x)).sum()


def complex_input():
    return ComplexInput(), {"x": torch.randn(4, dtype=torch.complex64)}


class GaussianHead(nn.Module):
    """nn.GaussianNLLLoss on a predicted mean and variance: PyTorch's own
    check that the variance is not negative is not run by the plan (a
    note says so)."""

    def __init__(self):
        super().__init__()
        self.mean, self.var = nn.Linear(4, 3), nn.Linear(4, 3)
        self.loss = nn.GaussianNLLLoss()

    def forward(self, x, y):
        return self.loss(self.mean(x), y, F.softplus(self.var(x)))


def gaussian_head():
    return GaussianHead(), {"x": torch.randn(2, 4), "y": torch.randn(2, 3)}


class Checkpointed(nn.Module):
    """Two blocks under torch.utils.checkpoint, as a training script's
    per-layer wrapper (or transformers' gradient_checkpointing_enable)
    writes them."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
                                    for _ in range(2))

    def forward(self, x):
        import torch.utils.checkpoint as cp
        for block in self.blocks:
            x = cp.checkpoint(block, x, use_reentrant=False)
        return x.sum()


def checkpointed():
    return Checkpointed(), {"x": torch.randn(2, 4)}


class OwnCheck(nn.Module):
    """The same kind of check in the model's own code: refused (a value
    of the data decides a branch)."""

    def __init__(self):
        super().__init__()
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = self.b(x)
        if torch.any(y < 0):
            raise ValueError("negative")
        return y.sum()


def own_check():
    return OwnCheck(), {"x": torch.randn(2, 4)}


def not_a_pair():
    return Unsupported()


class Random(nn.Module):
    """One random op per kind: each must be drawn in the plan at every step
    or refused, never folded into a value drawn once at trace time."""

    def __init__(self, kind, p=0.5):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 8))
        self.kind = kind
        self.drop = nn.Dropout(p)

    def forward(self, x):
        h = x @ self.w
        k = self.kind
        if k == "dropout":
            h = self.drop(h)
        elif k == "functional":
            h = F.dropout(h, 0.5, training=True)
        elif k == "dropout2d":
            h = F.dropout2d(h.reshape(1, 3, 2, 4), 0.5, training=True).reshape(3, 8)
        elif k == "feature_alpha":
            h = F.feature_alpha_dropout(h.reshape(1, 3, 8), 0.5, training=True).reshape(3, 8)
        elif k == "bernoulli":
            h = h * torch.bernoulli(torch.full_like(h, 0.5))
        elif k == "normal":
            h = h + torch.randn_like(h)
        elif k == "normal_":
            h = h * torch.empty_like(h).normal_()
        elif k == "multinomial":
            h = h[:, torch.multinomial(torch.ones(8), 8)]
        elif k == "randperm":
            h = h[:, torch.randperm(8)]
        elif k == "poisson":
            h = h * torch.poisson(torch.ones(3, 8))
        elif k == "rrelu":
            h = F.rrelu(h, training=True)
        elif k == "uniform":
            h = h * torch.rand(3, 8)
        elif k == "randint":  # diffusion-style timesteps, an integer draw
            h = h * (torch.randint(0, 1000, (3, 8)) % 7).to(h.dtype)
        elif k == "int_of_noise":  # an integer from a draw and the model's values
            h = h * (h * 100 + torch.rand(3, 8)).long().to(h.dtype)
        elif k == "int_at_drawn_positions":  # MAE-style: values gathered at drawn positions
            h = h * torch.gather(h, 1, torch.rand(3, 8).argsort(1)).round().long().to(h.dtype)
        elif k == "numpy":  # a SpecAugment-style mask drawn by numpy
            h = h * torch.from_numpy(np.random.rand(3, 8) < 0.5).to(h.dtype)
        elif k == "python":  # a layer drop decided by Python's generator
            if pyrandom.random() < 0.5:
                h = h * 2
        return (h ** 2).mean()


def random(kind="dropout", p=0.5):
    return Random(kind, p), {"x": torch.randn(3, 4)}


class Scalars(nn.Module):
    """0-dim and 1-dim step inputs, integer and boolean (OpInfo's samples
    of where, embedding and reductions on 0-dim tensors)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(5, 3))
        self.s = nn.Parameter(torch.randn(()))

    def forward(self, cond, idx, x, ids):
        row = F.embedding(idx, self.table)              # 0-dim index: [3]
        pick = torch.where(cond, x * self.s, self.s)     # all 0-dim
        rows = F.embedding(ids, self.table)              # [4, 3]
        total = pick.sum(dim=0) + pick.mean(dim=-1, keepdim=True) + pick.amax(0)
        return (row.sum() * total + rows.pow(2).mean()).reshape(())


def scalars():
    return Scalars(), {"cond": torch.tensor(True), "idx": torch.tensor(2),
                       "x": torch.tensor(1.5), "ids": torch.tensor([0, 4, 1, 1])}


class LengthsMask(nn.Module):
    """A value read in forward (issue 37.5): from constants (a lengths table
    built in forward, its largest entry), or from the data."""

    def __init__(self, from_data):
        super().__init__()
        self.from_data = from_data
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        if self.from_data:
            n = int((x > 0).sum().item())
        else:
            n = int(torch.tensor([3, 1, 2]).max().item())
        return self.proj(x[:, :n]).sum()


def lengths(from_data=False):
    return LengthsMask(from_data), {"x": torch.randn(2, 6, 4)}


class Recurrent(nn.Module):
    """A GRU (its weights read through nn.RNNBase's own list)."""

    def __init__(self):
        super().__init__()
        self.r = nn.GRU(4, 5, batch_first=True)

    def forward(self, x):
        return self.r(x)[0].pow(2).mean()


def gru():
    torch.manual_seed(0)
    return Recurrent(), {"x": torch.randn(2, 3, 4)}


class Cached(nn.Module):
    """Keeps its own list of its parameters and computes with that list:
    the traced parameters never reach forward."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.v = nn.Parameter(torch.randn(4))
        self.a = nn.Parameter(torch.randn(4))
        self.b = nn.Parameter(torch.randn(4))
        self.kept = [self.w, self.v, self.a, self.b]

    def forward(self, x):
        w, v, a, b = self.kept
        return ((x @ w + v) * a + b).pow(2).mean()


def cached():
    torch.manual_seed(0)
    return Cached(), {"x": torch.randn(2, 4)}


class Counter(nn.Module):
    """Reads a step counter it updates: a value no fixed plan can hold."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.register_buffer("n", torch.tensor(0))

    def forward(self, x):
        self.n += 1
        return (self.w * x).sum() * (2.0 if self.n.item() > 2 else 1.0)


def counter():
    return Counter(), {"x": torch.randn(3)}


def cumulative_bn():
    """Batch norm with momentum=None: a cumulative average over its step
    counter (momentum 1/n, changing every step)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=None), nn.Flatten(),
                      nn.Linear(64, 2))
    return m, {"input": torch.randn(2, 3, 6, 6)}, lambda out: out.pow(2).mean()


class SplitAtData(nn.Module):
    """Split points read from a tensor of the data (torch.tensor_split at a
    tensor of indices): the pieces' shapes depend on its values."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))

    def forward(self, x, points):
        return sum(p.sum() for p in torch.tensor_split(self.w * x, points))


def split_at_data():
    return SplitAtData(), {"x": torch.randn(6, 4), "points": torch.tensor([1, 4])}


class NarrowAtData(nn.Module):
    """x.narrow(0, start, 3) with start a tensor of the data: the result's
    shape is fixed, its rows are the data's choice."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(32.0).reshape(8, 4))

    def forward(self, x, start):
        return (self.w * x).narrow(0, start, 3).pow(2).sum()


def narrow_at_data():
    return NarrowAtData(), {"x": torch.ones(8, 4), "start": torch.tensor(1)}


def narrow_check(plan, tmp):
    """Runs the plan traced at start 1 on starts 4 and -3 (6 from the
    front); its loss must be PyTorch's at each start."""
    import json
    import subprocess
    for start in (4, -3):
        model, data = narrow_at_data()
        data["start"] = torch.tensor(start)
        np.savez(f"{tmp}/narrow.npz", **{k: v.numpy() for k, v in data.items()})
        subprocess.run(["fsdp-run", plan, "--data", f"{tmp}/narrow.npz", "--steps", "1",
                        "--quiet", "--log", f"{tmp}/narrow.jsonl"], check=True)
        got = json.loads(open(f"{tmp}/narrow.jsonl").readline())["loss"]
        want = float(model(**data))
        assert abs(got - want) <= 1e-6 * want, (start, got, want)
        print(f"narrow at {start}: loss {got:.1f}, PyTorch {want:.1f}")


class MaskedSelect(nn.Module):
    """A boolean-mask index: as many elements as the mask holds."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        y = self.w * x
        return y[x > 0].sum()


def masked_select():
    return MaskedSelect(), {"x": torch.randn(6, 4)}


class HashBuckets(nn.Module):
    """Ids hashed into an embedding's rows with a constant past 2^53 (a
    plan's i64 constant, which a double would round)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)

    def forward(self, ids):
        return self.emb((ids + torch.tensor([2**60 + 1])) % 7).pow(2).mean()


def hash_buckets():
    torch.manual_seed(0)
    return HashBuckets(), {"ids": torch.randint(0, 100, (2, 5))}
