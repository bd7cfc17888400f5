"""ATen ops written as compositions of fsdp ops.

lower.py maps the ATen ops that have an fsdp op of their own; this module
writes the others that a model's forward uses (OpInfo's op database and
the torchvision zoo found them) from ops the dialect already has, so each
needs no kernel, no device lowering and no VJP of its own: its gradient is
the composition's. PyTorch's own decompositions (torch._decomp, applied
while tracing: capture.py) cover more; the ones here are those PyTorch
1.13 writes in its prims ops, which fsdp does not lower, or not at all.

Numerics follow PyTorch's formulas where the choice matters (sinh through
expm1 near 0, logsumexp shifted by the maximum, the variance about the
mean). Index maps that depend only on shapes (flip, roll, reflection and
replication padding, nearest upsampling, unfold) are gathers with a
constant index; linear resamplings (bilinear upsampling, adaptive average
pooling with uneven windows) are products with a constant matrix.
"""
from . import (complex, draws, elementwise, nn, reductions, shapes, sorting,  # noqa: F401
               writes)  # (register lowerings)
from .nn import conv, conv_transpose  # noqa: F401 (lower.py's convolutions)
