"""Reductions and products as compositions of fsdp ops: var/std about the
mean, logsumexp shifted by the maximum, norms, exact products (a tree of
multiplications, a Hillis-Steele scan)."""
import math

import torch

from ..lower import _axes, dim, lowers, op_name
from .builder import B, arg, float_in

# -- reductions --------------------------------------------------------------------


def _dims_keep(args, kwargs, rank, i_dim=1, i_keep=2):
    dims = arg(args, kwargs, i_dim, "dim")
    keep = bool(arg(args, kwargs, i_keep, "keepdim", False))
    return _axes(dims, rank), keep


def _reversed(b, x):
    """An order-reversing map of x, its own inverse: -x on floats, -1 - x
    (~x) on int64, which no value overflows (-INT64_MIN would)."""
    if x.dtype.is_floating_point:
        return b.un("neg", x)
    return b.sub(b.s(-1, x.dtype), x)


def _extreme(c, x, axes, keep, is_max):
    """max or min of x over axes; integers (and booleans) in int64, cast
    back."""
    b = B(c)
    src = x if x.dtype.is_floating_point else c.cast(x, torch.int64)
    if is_max:
        y = b.reduce("reduce_max", src, axes, keep)
    else:
        y = _reversed(b, b.reduce("reduce_max", _reversed(b, src), axes, keep))
    return y if src is x else c.cast(y, x.dtype)


def _first_index(c, x, extreme, axis, keep):
    """The first position along `axis` where x equals `extreme` (x's
    maximum or minimum there, kept as an axis of 1) or is NaN (a NaN is
    the extreme, as in PyTorch's max, min, argmax and argmin): the
    maximum of -1 - position over the hits."""
    b = B(c)
    at = b.eq(x, extreme)
    if x.dtype.is_floating_point:
        at = b.bin("or", at, b.isnan(x))
    n = x.shape[axis]
    pos = c.w.constant(torch.arange(n, dtype=torch.int64).reshape(
        [n if i == axis else 1 for i in range(x.rank)]))
    last = b.s(-1, torch.int64)
    hits = b.where(at, b.sub(last, pos), b.s(-1 - n, torch.int64))
    return b.sub(last, b.reduce("reduce_max", hits, [axis], keep))


@lowers("aten.amin")
def _amin(c, node, args, kwargs):
    x = c.v(args[0])
    axes, keep = _dims_keep(args, kwargs, x.rank)
    return _extreme(c, x, axes, keep, False)


@lowers("aten.argmax", "aten.argmin")
def _argmax(c, node, args, kwargs):
    """The first position of the maximum (minimum) along dim, or of the
    flattened tensor without one; a NaN counts as the extreme."""
    x = c.v(args[0])
    if x.dtype == torch.bool:
        x = c.cast(x, torch.int64)
    d = arg(args, kwargs, 1, "dim")
    shape = c.out()[0]   # keepdim's axis of 1, or none: a reshape either way
    if d is None or x.rank == 0:
        x, axis = c.reshape(x, (max(x.numel, 1),)), 0
    else:
        axis = dim(d, x.rank)
    is_max = op_name(node.target) == "aten.argmax"
    index = _first_index(c, x, _extreme(c, x, [axis], True, is_max), axis, True)
    return c.reshape(index, tuple(shape))


@lowers("aten.any", "aten.all")
def _any_all(c, node, args, kwargs):
    """any/all over dims (none: every element), of any dtype: each element
    as 1.0 where it is non-zero (NaN is), else 0.0, then the maximum
    (any) or minimum (all). FlexAttention's fully masked rows, padding
    masks."""
    b = B(c)
    x = c.v(args[0])
    if x.dtype == torch.bool:
        x = c.cast(x, torch.float32)
    nonzero = c.emit("fsdp.not", [b.eq(x, 0.0)], [(x.shape, torch.bool)])
    ones = c.cast(nonzero, torch.float32)
    axes, keep = _dims_keep(args, kwargs, x.rank)
    if op_name(node.target) == "aten.any":
        y = b.reduce("reduce_max", ones, axes, keep)
    else:
        y = b.un("neg", b.reduce("reduce_max", b.un("neg", ones), axes, keep))
    return b.gt(y, 0.5)


@lowers("aten.max", "aten.min")
def _max_min(c, node, args, kwargs):
    """max(x) (all), max(x, dim, keepdim) (values, and the indices of the
    first maximum) and the binary max(x, y)."""
    b = B(c)
    x = c.v(args[0])
    is_max = node.target.overloadpacket.__name__ == "max"
    if len(args) > 1 and hasattr(args[1], "op"):  # max.other
        dtype = c.out()[1]
        return b.bin("max" if is_max else "min", c.cast(x, dtype), c.operand(args[1], dtype))
    if len(args) == 1:
        return _extreme(c, x, list(range(x.rank)), False, is_max)
    axes, keep = _dims_keep(args, kwargs, x.rank)
    values = _extreme(c, x, axes, True, is_max)
    indices = None
    if len(axes) == 1 and x.rank > 0:
        src = x if x.dtype != torch.bool else c.cast(x, torch.int64)
        extreme = values if src is x else c.cast(values, torch.int64)
        indices = _first_index(c, src, extreme, axes[0], keep)
    if not keep:
        values = c.reshape(values, tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return [values, indices]


def _correction(args, kwargs, unbiased_index=None):
    corr = kwargs.get("correction")
    if corr is None and "unbiased" in kwargs:
        corr = 1 if kwargs["unbiased"] else 0
    if corr is None and unbiased_index is not None and len(args) > unbiased_index \
            and isinstance(args[unbiased_index], bool):
        corr = 1 if args[unbiased_index] else 0
    return 1 if corr is None else corr


def _variance(c, x, axes, keep, correction):
    b = B(c)
    n = math.prod(x.shape[a] for a in axes) if axes else 1
    mean = b.reduce("reduce_mean", x, axes, True)
    d = b.sub(x, mean)
    var = b.div(b.reduce("reduce_sum", b.mul(d, d), axes, keep), float(max(n - correction, 0)))
    return var, (mean if keep else c.reshape(mean, var.shape))


@lowers("aten.var", "aten.std", "aten.var_mean", "aten.std_mean")
def _var(c, node, args, kwargs):
    b = B(c)
    x = c.v(args[0])
    dims = arg(args, kwargs, 1, "dim")
    if isinstance(dims, bool):  # var(x, unbiased)
        dims = None
    axes = _axes(dims, x.rank)
    keep = bool(kwargs.get("keepdim", args[3] if len(args) > 3 and isinstance(args[3], bool)
                           else False))
    corr = _correction(args, kwargs, 2 if len(args) > 2 and isinstance(args[2], bool) else
                       (1 if len(args) > 1 and isinstance(args[1], bool) else None))
    var, mean = _variance(c, x, axes, keep, corr)
    name = node.target.overloadpacket.__name__
    out = b.un("sqrt", var) if name.startswith("std") else var
    return [out, mean] if name.endswith("_mean") else out


@lowers("aten.logsumexp")
def _logsumexp(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    axes, keep = _dims_keep(args, kwargs, x.rank)
    m = b.reduce("reduce_max", x, axes, True)
    finite = b.where(b.eq(b.un("abs", m), math.inf), 0.0, m)
    s = b.reduce("reduce_sum", b.un("exp", b.sub(x, finite)), axes, True)
    y = b.add(b.un("log", s), finite)
    return y if keep else c.reshape(y, c.out()[0])


def p_norm(c, x, p, axes, keep):
    """x's p-norm over `axes` (inf, -inf, 0, 1, 2 or any other p), zero
    with a zero gradient where every element is zero, as torch's norm
    backward gives (sqrt's and pow's would be inf · 0 = NaN there)."""
    b = B(c)
    dtype = x.dtype
    a = b.un("abs", x)
    if p == math.inf:
        y = b.reduce("reduce_max", a, axes, keep)
    elif p == -math.inf:
        y = b.un("neg", b.reduce("reduce_max", b.un("neg", a), axes, keep))
    elif p == 1:
        y = b.reduce("reduce_sum", a, axes, keep)
    elif p == 2:
        # Zero where the sum is zero, with a zero gradient there (torch's
        # norm backward masks it; sqrt's would be inf · 0 = NaN).
        s = b.reduce("reduce_sum", b.mul(x, x), axes, keep)
        zero = b.eq(s, 0.0)
        y = b.where(zero, 0.0, b.un("sqrt", b.where(zero, 1.0, s)))
    elif p == 0:
        y = b.reduce("reduce_sum", c.cast(b.c.emit("fsdp.not", [b.eq(x, 0.0)],
                                                     [(x.shape, torch.bool)]), dtype), axes, keep)
    else:
        s = b.reduce("reduce_sum", b.bin("pow", a, float(p)), axes, keep)
        zero = b.eq(s, 0.0)
        y = b.where(zero, 0.0, b.bin("pow", b.where(zero, 1.0, s), 1.0 / float(p)))
    return y


@lowers("aten.linalg_vector_norm", "aten.norm")
def _norm(c, node, args, kwargs):
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    p = arg(args, kwargs, 1, "ord" if "linalg" in str(node.target) else "p", 2)
    p = 2 if p is None else p
    dims = arg(args, kwargs, 2, "dim")
    keep = bool(arg(args, kwargs, 3, "keepdim", False))
    y = p_norm(c, x, p, _axes(dims, x.rank), keep)
    return c.reshape(y, shape) if y.shape != shape else y


def _tree_product(c, x, axis):
    """Π along `axis` as a tree of multiplications of halves: the exact
    value, and an exact gradient where factors are zero (a product of
    logarithms would give 0 where torch gives the other factors' product)."""
    b = B(c)
    while x.shape[axis] > 1:
        n = x.shape[axis]
        half = n // 2
        y = b.mul(b.slice(x, axis, 0, half), b.slice(x, axis, half, 2 * half))
        x = b.concat([y, b.slice(x, axis, 2 * half, n)], axis) if n % 2 else y
    return x


@lowers("aten.prod")
def _prod(c, node, args, kwargs):
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)   # integers: int64, wrapping as PyTorch's
    d = arg(args, kwargs, 1, "dim")
    if isinstance(d, torch.dtype):
        d = None
    if x.numel == 0:
        return c.w.splat(1.0 if dtype.is_floating_point else 1, shape, dtype)
    axes = _axes(d, x.rank)
    if x.rank == 0:
        return x
    # The reduced axes last, as one axis.
    kept = [i for i in range(x.rank) if i not in axes]
    moved = c.transpose(x, kept + axes)
    flat = c.reshape(moved, tuple(x.shape[i] for i in kept) +
                     (math.prod(x.shape[i] for i in axes),))
    return c.reshape(_tree_product(c, flat, flat.rank - 1), shape)


@lowers("aten.cumprod")
def _cumprod(c, node, args, kwargs):
    """A Hillis-Steele scan of products (B.scan): exact, with zeros too;
    integers in int64."""
    dtype = c.out()[1]
    x = c.cast(c.v(args[0]), dtype) if not dtype.is_floating_point else float_in(c, args[0])
    if x.rank == 0 or x.numel == 0:
        return x
    return B(c).scan(x, dim(args[1], x.rank), "mul", 1.0 if x.dtype.is_floating_point else 1)


@lowers("aten.nansum")
def _nansum(c, node, args, kwargs):
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    axes, keep = _dims_keep(args, kwargs, x.rank)
    return b.reduce("reduce_sum", b.where(b.isnan(x), 0.0, x), axes, keep)
