"""The builder the compositions write fsdp ops with (result types worked
out), and argument helpers."""
import math

import torch

from ..lower import _bshape
from ..mlir import bool_attr, i64_array, i64_attr

# -- a small builder over Context ------------------------------------------------


class B:
    """Emits fsdp ops with their result types worked out."""

    def __init__(self, c):
        self.c = c

    def s(self, value, dtype):
        return self.c.scalar(value, dtype)

    def un(self, op, x):
        return self.c.emit("fsdp." + op, [x], [(x.shape, x.dtype)])

    def bin(self, op, a, b):
        if not hasattr(b, "shape"):
            b = self.s(b, a.dtype)
        if not hasattr(a, "shape"):
            a = self.s(a, b.dtype)
        out = torch.bool if op in ("equal", "less", "greater", "and", "or") else a.dtype
        return self.c.emit("fsdp." + op, [a, b], [(_bshape(a, b), out)])

    def add(self, a, b):
        return self.bin("add", a, b)

    def sub(self, a, b):
        return self.bin("sub", a, b)

    def mul(self, a, b):
        return self.bin("mul", a, b)

    def div(self, a, b):
        return self.bin("div", a, b)

    def where(self, cond, a, b):
        dtype = (a.dtype if hasattr(a, "shape") else b.dtype if hasattr(b, "shape")
                 else self.c.out()[1])  # two scalars: the node's result dtype
        a = a if hasattr(a, "shape") else self.s(a, dtype)
        b = b if hasattr(b, "shape") else self.s(b, dtype)
        shape = tuple(torch.broadcast_shapes(torch.Size(cond.shape), torch.Size(a.shape),
                                             torch.Size(b.shape)))
        return self.c.emit("fsdp.where", [cond, a, b], [(shape, dtype)])

    def neg(self, x):
        """-x (the kernels negate int64 exactly, wrapping as PyTorch)."""
        return self.un("neg", x)

    def abs(self, x):
        """|x|, of floats or of int64."""
        return self.un("abs", x)

    def gt(self, a, b):
        return self.bin("greater", a, b)

    def lt(self, a, b):
        return self.bin("less", a, b)

    def eq(self, a, b):
        return self.bin("equal", a, b)

    def isnan(self, x):
        return self.c.emit("fsdp.not", [self.eq(x, x)], [(x.shape, torch.bool)])

    def reduce(self, op, x, axes, keep):
        axes = sorted(set(axes))
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
        if not keep:
            shape = [d for i, d in enumerate(x.shape) if i not in axes]
        return self.c.emit("fsdp." + op, [x], [(tuple(shape), x.dtype)],
                           {"axes": i64_array(axes), "keepdims": bool_attr(bool(keep))})

    def wrapped(self, index, n):
        """An index as int64, its negative values counted from the end of an
        axis of n (torch's rule where it allows them)."""
        index = self.c.cast(index, torch.int64)
        return self.where(self.lt(index, 0), self.add(index, n), index)

    def gather(self, x, index, axis):
        """x's slices at `index` (a torch tensor, or a Value) along `axis`."""
        if isinstance(index, torch.Tensor):
            index = self.c.w.constant(index.to(torch.int64))
        shape = x.shape[:axis] + index.shape + x.shape[axis + 1:]
        return self.c.emit("fsdp.gather", [x, index], [(shape, x.dtype)],
                           {"axis": i64_attr(axis)})

    def along(self, x, axis, matrix):
        """x multiplied along `axis` by a constant (n_in, n_out) matrix."""
        perm = [i for i in range(x.rank) if i != axis] + [axis]
        moved = self.c.transpose(x, perm)
        lead = moved.shape[:-1]
        flat = self.c.reshape(moved, (math.prod(lead) if lead else 1, moved.shape[-1]))
        m = self.c.w.constant(matrix.to(x.dtype))
        y = self.c.emit("fsdp.matmul", [flat, m], [((flat.shape[0], matrix.shape[1]), x.dtype)])
        y = self.c.reshape(y, lead + (matrix.shape[1],))
        inverse = [perm.index(i) for i in range(x.rank)]
        return self.c.transpose(y, inverse)

    def scan(self, x, axis, op, identity):
        """The inclusive scan of x along `axis` under the binary fsdp op
        (add, mul), Hillis-Steele: log2(n) steps, each combining with the
        value 2^k places before (`identity` before the start). n log n
        work and no n² constant, so the axis is not bounded."""
        n, step = x.shape[axis], 1
        while step < n:
            pad = list(x.shape)
            pad[axis] = step
            shifted = self.concat([self.c.w.splat(identity, tuple(pad), x.dtype),
                                   self.slice(x, axis, 0, n - step)], axis)
            x = self.bin(op, x, shifted)
            step *= 2
        return x

    def concat(self, parts, axis):
        parts = [p for p in parts if p.shape[axis] > 0]
        if len(parts) == 1:
            return parts[0]
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        return self.c.emit("fsdp.concat", parts, [(tuple(shape), parts[0].dtype)],
                           {"axis": i64_attr(axis)})

    def slice(self, x, axis, start, end, step=1):
        if start == 0 and end == x.shape[axis] and step == 1:
            return x
        starts, limits, strides = [0] * x.rank, list(x.shape), [1] * x.rank
        starts[axis], limits[axis], strides[axis] = start, end, step
        shape = list(x.shape)
        shape[axis] = max(0, -(-(end - start) // step))
        return self.c.emit("fsdp.slice", [x], [(tuple(shape), x.dtype)],
                           {"starts": i64_array(starts), "limits": i64_array(limits),
                            "strides": i64_array(strides)})


def arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def float_in(c, a):
    """A tensor argument in the node's (float) result dtype."""
    return c.cast(c.v(a), c.out()[1])
