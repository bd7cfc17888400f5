"""Small modules for traced.test (python3 -m fsdp_trace FILE:FACTORY)."""
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
        return torch.cumsum(self.a(x), dim=1)


class Unsupported(nn.Module):
    """Ops fsdp has no lowering for, in two modules."""

    def __init__(self):
        super().__init__()
        self.scan = Scan()
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        z = torch.sort(self.b(self.scan(x)), dim=1).values
        return torch.cumsum(z, dim=0).sum()


def unsupported():
    return Unsupported(), {"x": torch.randn(2, 4)}


def not_a_pair():
    return Unsupported()
