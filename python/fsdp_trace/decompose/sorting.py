"""Sorting: sort, argsort, msort, topk and kthvalue, each one fsdp.argsort
(the positions that sort an axis: stable, NaN last as torch.sort puts it)
and a gather of the values at those positions, so the values' gradient is
the gather's scatter-add and the indices (int64) take none."""
import torch

from ..lower import TraceError, dim, lowers, op_name
from ..mlir import bool_attr, i64_attr
from .builder import B, arg
from .shapes import take_along


def argsort(c, x, d, descending):
    """The positions that sort x along d (stable). fsdp.argsort takes
    floats: booleans are cast; an integer is split into three 22-bit digits
    (each exact in float32) and sorted digit by digit from the lowest, each
    pass stable, so equal higher digits keep the lower digits' order (a
    radix sort): exact over all of int64."""
    attrs = {"axis": i64_attr(d), "descending": bool_attr(bool(descending))}
    if x.dtype == torch.bool:
        x = c.cast(x, torch.float32)
    if x.dtype.is_floating_point:
        return c.emit("fsdp.argsort", [x], [(x.shape, torch.int64)], attrs)
    from .elementwise import integer_division
    b = B(c)
    digit = b.s(1 << 22, torch.int64)
    rest, low = integer_division(c, c.cast(x, torch.int64), digit, "floor")
    high, middle = integer_division(c, rest, digit, "floor")
    perm = None
    for key in (low, middle, high):
        if perm is not None:
            key = take_along(c, key, perm, d)
        step = c.emit("fsdp.argsort", [c.cast(key, torch.float32)],
                      [(x.shape, torch.int64)], attrs)
        perm = step if perm is None else take_along(c, perm, step, d)
    return perm


def _as_row(c, x):
    """A 0-dim tensor as [1] (torch sorts it as one element)."""
    return c.reshape(x, (1,)) if x.rank == 0 else x


@lowers("aten.sort", "aten.sort.stable", "aten.argsort", "aten.msort")
def _sort(c, node, args, kwargs):
    x = c.v(args[0])
    name = str(node.target)
    if "msort" in name:
        d, descending = 0, False
    else:
        # sort(x, dim=-1, descending=False) and sort.stable(x, *, stable,
        # dim, descending): ours is stable either way.
        d = kwargs.get("dim", args[1] if len(args) > 1 and not isinstance(args[1], bool)
                       else -1)
        descending = kwargs.get("descending",
                                args[2] if len(args) > 2 else False)
    shape = x.shape
    x = _as_row(c, x)
    d = dim(d, x.rank)
    index = argsort(c, x, d, descending)
    values = take_along(c, x, index, d)
    if "argsort" in name:
        return c.reshape(index, shape)
    if "msort" in name:
        return c.reshape(values, shape)
    return [c.reshape(values, shape), c.reshape(index, shape)]


def _sorted_range(c, args, kwargs, descending, first):
    """x's positions `first(k)` = (lo, hi) of its sorted order along dim
    (args: x, k, dim) and their values; with x's shape and the axis."""
    x = c.v(args[0])
    k = int(args[1])
    shape = x.shape
    x = _as_row(c, x)
    d = dim(arg(args, kwargs, 2, "dim", -1), x.rank)
    lo, hi = first(k)
    index = B(c).slice(argsort(c, x, d, descending), d, lo, hi)
    return shape, d, take_along(c, x, index, d), index


@lowers("aten.topk")
def _topk(c, node, args, kwargs):
    """The k largest (or smallest) along dim, in order (sorted=False gives
    them in sorted order too, which torch allows)."""
    largest = arg(args, kwargs, 3, "largest", True)
    shape, d, values, index = _sorted_range(c, args, kwargs, largest, lambda k: (0, k))
    k = int(args[1])
    out = tuple(shape[:d] + (k,) + shape[d + 1:]) if shape else ()
    return [c.reshape(values, out), c.reshape(index, out)]


@lowers("aten.kthvalue")
def _kthvalue(c, node, args, kwargs):
    """The k-th smallest along dim (1-based) and its position."""
    keep = arg(args, kwargs, 3, "keepdim", False)
    shape, d, values, index = _sorted_range(c, args, kwargs, False, lambda k: (k - 1, k))
    if shape:
        out = shape[:d] + (1,) + shape[d + 1:] if keep else shape[:d] + shape[d + 1:]
    else:
        out = ()
    return [c.reshape(values, tuple(out)), c.reshape(index, tuple(out))]


@lowers("aten.median", "aten.nanmedian")
def _median(c, node, args, kwargs):
    """The lower median (the ((n-1)//2)-th smallest), over every element
    (its value) or along dim (its value and position). median: NaN where the
    axis holds one (the first NaN's position); nanmedian: the median of the
    axis's other values, found at run time from their count (NaN sorts
    last). The value is gathered at the position: its gradient goes there."""
    b = B(c)
    x = c.v(args[0])
    whole = len(args) < 2 and "dim" not in kwargs
    if whole:
        x, d = c.reshape(x, (x.numel,)), 0
    else:
        shape = x.shape
        x = _as_row(c, x)
        d = dim(arg(args, kwargs, 1, "dim"), x.rank)
    n = x.shape[d]
    order = argsort(c, x, d, False)
    count = b.reduce("reduce_sum", b.where(b.isnan(x), b.s(0.0, x.dtype), 1.0), [d], True)
    if "nanmedian" in str(node.target):
        k = b.bin("max", b.un("floor", b.mul(b.sub(count, 1.0), 0.5)), 0.0)
    else:
        k = b.where(b.lt(count, float(n)), count, float((n - 1) // 2))
    pos = take_along(c, order, c.cast(k, torch.int64), d)
    value = take_along(c, x, pos, d)
    if whole:
        return c.reshape(value, ())
    keep = arg(args, kwargs, 2, "keepdim", False)
    out = (shape[:d] + (1,) + shape[d + 1:] if keep else shape[:d] + shape[d + 1:]) if shape else ()
    return [c.reshape(value, tuple(out)), c.reshape(pos, tuple(out))]


@lowers("aten.bucketize", "aten.searchsorted")
def _bucketize(c, node, args, kwargs):
    """bucketize(x, boundaries) and searchsorted(sorted, x): for each value,
    how many of the sorted sequence's elements lie below it (right=False,
    side 'left') or at or below it (right=True, side 'right'), a NaN value
    after them all, as PyTorch places it: the comparisons of every value
    with every element, counted (n·m; exact on int64). searchsorted's
    sequence may have leading axes matching the values'; a sorter is
    refused."""
    b = B(c)
    shape, _ = c.out()
    if op_name(node.target) == "aten.bucketize":
        values, seq = args[0], args[1]
    else:
        seq, values = args[0], args[1]
        if kwargs.get("sorter") is not None:
            raise TraceError("searchsorted with a sorter (sort the sequence first)")
    right = bool(kwargs.get("right", False))
    if kwargs.get("side") is not None:
        right = kwargs["side"] == "right"
    s = c.v(seq)
    v_dtype = c.v(values).dtype if isinstance(values, torch.fx.Node) else (
        torch.float32 if isinstance(values, float) else torch.int64)
    dtype = (torch.float32 if s.dtype.is_floating_point or v_dtype.is_floating_point
             else torch.int64)
    s = c.cast(s, dtype)
    v = c.operand(values, dtype)
    if s.rank == 1:   # every value against the one sequence
        vv = c.reshape(v, v.shape + (1,))
        ss = s
    else:             # [.., m] against values [.., k]: a row each
        vv = c.reshape(v, v.shape + (1,))
        ss = c.reshape(s, s.shape[:-1] + (1, s.shape[-1]))
    below = b.bin("or", b.lt(ss, vv), b.eq(ss, vv)) if right else b.lt(ss, vv)
    if dtype.is_floating_point:
        below = b.bin("or", below, b.isnan(vv))
    count = b.reduce("reduce_sum", c.cast(below, torch.int64), [below.rank - 1], False)
    return c.reshape(count, tuple(shape))
