"""Writes at positions: index_fill and index_copy, scatter and
scatter_add, index_put and put, masked_scatter, max_unpool, scatter_reduce
and index_reduce. A position written twice keeps its last writer, found by
a stable sort of the positions (_last_writer); scatter_reduce's prod,
amax and amin compare the positions with the values, bounded at
LAST_WRITER_LIMIT pairs; what is added is a scatter_add. Where PyTorch's
backward gives a gradient the composition would not (every writer of an
overwritten position, the values tied for a maximum), the forward reads
the values behind stop_gradient and a term that is zero carries it."""
import math
from types import SimpleNamespace

import torch

from ..lower import TraceError, dim, lowers
from ..mlir import i64_attr
from .builder import B, arg
from .shapes import _block_lead, _indexed_rows, _linear_index, cumulative_sum


def _last_writer(c, index, n):
    """For each of n positions, the last k with index[k] at it (negative
    indices count from the end): (written [n] bool, k [n] int64, 0 where
    unwritten). The CPU's loops write in order, so the last write is the
    one that stays. A stable sort of the positions puts each one's writers
    together in their order, and the last of each run adds its number (plus
    one) at its position into zeros: O(m log m) for m writes, unbounded
    (comparing every position with every write was O(n·m), and refused
    past 2^22 pairs)."""
    from .sorting import argsort
    b = B(c)
    m = index.numel
    idx = b.wrapped(c.cast(c.reshape(index, (m,)), torch.int64), n)
    perm = argsort(c, c.cast(idx, torch.float32) if n <= 1 << 24 else idx, 0, False)
    ordered = b.gather(idx, perm, 0)
    number = b.add(perm, b.s(1, torch.int64))
    if m > 1:  # the last of each run of equal positions
        following = b.concat([b.slice(ordered, 0, 1, m), c.w.splat(-1, (1,), torch.int64)], 0)
        number = b.where(b.eq(ordered, following), b.s(0, torch.int64), number)
    at = c.emit("fsdp.scatter_add", [c.w.splat(0, (n,), torch.int64), ordered, number],
                [((n,), torch.int64)], {"axis": i64_attr(0)})
    written = b.gt(at, b.s(0, torch.int64))
    return written, b.where(written, b.sub(at, b.s(1, torch.int64)), b.s(0, torch.int64))


def _every_writer(c, v, constant, read, place):
    """read(v): the values a write keeps (each position's last writer),
    with PyTorch's gradient for v: the result's gradient at each position
    for every writer, an overwritten duplicate too. read sees v behind
    stop_gradient, and place(v - stop_gradient(v)) (zeros: v's elements
    added at their positions) carries the gradient."""
    if constant or not v.dtype.is_floating_point:
        return read(v)
    held = c.emit("fsdp.stop_gradient", [v], [(v.shape, v.dtype)])
    b = B(c)
    return b.add(read(held), place(b.sub(v, held)))


@lowers("aten.index_fill", "aten.index_copy")
def _index_fill_copy(c, node, args, kwargs):
    """index_fill(x, d, index, value): the slices at index set to value;
    index_copy(x, d, index, source): to source's slices (the last one where
    an index repeats). A where over a per-position mask, so x's gradient is
    zero in the replaced slices; source's slices get the gradient at their
    positions, an overwritten one too, as PyTorch's (_every_writer)."""
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    if x.rank == 0:
        x = c.reshape(x, (1,))
    d = dim(args[1], x.rank)
    n = x.shape[d]
    if c.v(args[2]).numel == 0:  # nothing written (source has no slice)
        return c.reshape(x, shape)
    written, src = _last_writer(c, c.v(args[2]), n)
    at = tuple(n if i == d else 1 for i in range(x.rank))
    mask = c.reshape(written, at)
    if "index_copy" in str(node.target):
        source = c.cast(c.v(args[3]), dtype)
        if source.rank == 0:
            source = c.reshape(source, (1,))
        at = b.wrapped(c.reshape(c.v(args[2]), (source.shape[d],)), n)
        value = _every_writer(
            c, source, c.is_const(args[3]), lambda v: b.gather(v, src, d),
            lambda z: c.emit("fsdp.scatter_add", [c.w.splat(0, x.shape, dtype), at, z],
                             [(x.shape, dtype)], {"axis": i64_attr(d)}))
    else:
        value = c.operand(args[3], dtype)
    return c.reshape(b.where(mask, value, x), shape)


@lowers("aten.scatter_add", "aten.index_add")
def _scatter_add(c, node, args, kwargs):
    """scatter_add(x, d, index, src): x plus src added at the flat positions
    of index's elements (_linear_index); index_add(x, d, index, src, alpha):
    src's slices added at index along d."""
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    d = dim(args[1], max(x.rank, 1))
    index, src = c.v(args[2]), c.cast(c.v(args[3]), dtype)
    if "index_add" in str(node.target):
        alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
        if alpha != 1:
            src = b.mul(src, float(alpha))
        if x.rank == 0:
            return b.add(x, c.reshape(src, ()))
        return c.emit("fsdp.scatter_add", [x, c.reshape(index, (index.numel,)), src],
                      [(x.shape, dtype)], {"axis": i64_attr(d)})
    if x.rank == 0:
        return b.add(x, c.reshape(src, ()))
    if src.shape != index.shape:  # only the part of src that index covers
        for axis, n in enumerate(index.shape):
            src = b.slice(src, axis, 0, n)
    lin = c.reshape(_linear_index(c, x, index, d), (index.numel,))
    flat = c.emit("fsdp.scatter_add", [c.reshape(x, (x.numel,)), lin,
                                       c.reshape(src, (index.numel,))],
                  [((x.numel,), dtype)], {"axis": i64_attr(0)})
    return c.reshape(flat, shape)


@lowers("aten.scatter")
def _scatter(c, node, args, kwargs):
    """scatter(x, d, index, src or value): x with src[.., j, ..] written at
    index[.., j, ..] along d (one-hot labels, masks). Each position along d
    takes the last j that writes it (the CPU's loop order), found at run
    time by comparing index with the positions; a where then picks src's
    gathered element or x's; every element of src gets the gradient at its
    position, an overwritten one too, as PyTorch's (_every_writer).
    reduce='add' is scatter_add; 'multiply' is refused."""
    b = B(c)
    shape, dtype = c.out()
    reduce = kwargs.get("reduce", args[4] if len(args) > 4 else None)
    if reduce == "add":
        return _scatter_add(c, node, list(args[:4]), {})
    if reduce is not None:
        raise TraceError(f"scatter with reduce='{reduce}' has no lowering (add has)")
    x = c.cast(c.v(args[0]), dtype)
    if x.rank == 0:
        x = c.reshape(x, (1,))
    d = dim(args[1], x.rank)
    index = c.cast(c.v(args[2]), torch.int64)
    if index.rank == 0:
        index = c.reshape(index, (1,))
    if index.numel == 0:
        return c.reshape(x, shape)
    n = x.shape[d]
    idx = b.wrapped(index, n)
    src_arg = args[3]
    if index.shape[d] == 1:
        # One write a line (one-hot labels): no repeats, so the written
        # positions are a comparison with the positions, and src (one
        # element a line) is broadcast along d; its gradient, where's,
        # is the result's at the position written.
        written = b.eq(idx, c.w.constant(torch.arange(n, dtype=torch.int64).reshape(
            (1,) * d + (n,) + (1,) * (x.rank - d - 1))))
        value = (_covered(c, src_arg, index, dtype) if isinstance(src_arg, torch.fx.Node)
                 else c.operand(src_arg, dtype))
        return c.reshape(b.where(_beyond(c, written, x.shape, d, torch.bool),
                                 _beyond(c, value, x.shape, d, dtype), x), shape)
    # The positions index covers: index's extent on the other axes, x's on
    # d; each element of index writes one of them (its flat position there).
    region = index.shape[:d] + (n,) + index.shape[d + 1:]
    count = math.prod(region)
    at = c.reshape(_linear_index(c, SimpleNamespace(shape=region, rank=len(region)), idx, d),
                   (idx.numel,))
    written, writer = _last_writer(c, at, count)
    if isinstance(src_arg, torch.fx.Node):
        src = _covered(c, src_arg, index, dtype)

        def place(z):  # z's elements added at their positions
            flat = c.emit("fsdp.scatter_add", [c.w.splat(0, (count,), dtype), at,
                                               c.reshape(z, (idx.numel,))],
                          [((count,), dtype)], {"axis": i64_attr(0)})
            return c.reshape(flat, region)
        value = _every_writer(
            c, src, c.is_const(src_arg),
            lambda v: c.reshape(b.gather(c.reshape(v, (idx.numel,)), writer, 0), region), place)
    else:
        value = c.operand(src_arg, dtype)
    return c.reshape(b.where(_beyond(c, c.reshape(written, region), x.shape, d, torch.bool),
                             _beyond(c, value, x.shape, d, dtype), x), shape)


def _covered(c, src_arg, index, dtype):
    """scatter's src, only the part index covers (src may be larger)."""
    src = c.cast(c.v(src_arg), dtype)
    if src.rank == 0:
        src = c.reshape(src, (1,))
    for axis, m in enumerate(index.shape):
        src = B(c).slice(src, axis, 0, m)
    return src


def _beyond(c, v, full, d, dtype):
    """v (index's extent on the axes other than d) padded with zeros (False)
    to `full` on them: beyond index's extent, x is untouched. A number as
    it is."""
    if not hasattr(v, "shape") or not v.rank:
        return v
    for axis in range(len(full)):
        extra = full[axis] - v.shape[axis]
        if axis != d and extra > 0:
            pad = list(v.shape)
            pad[axis] = extra
            v = B(c).concat([v, c.w.splat(False if dtype == torch.bool else 0.0, tuple(pad),
                                          dtype)], axis)
    return v


# scatter_reduce's prod, amax and amin find each position's values through
# a [positions, values] comparison: bounded.
LAST_WRITER_LIMIT = 1 << 22


@lowers("aten.index_put", "aten._unsafe_index_put")
def _index_put(c, node, args, kwargs):
    """x[indices] = values (with accumulate, +=). A boolean mask from the
    data with values that broadcast over the selected elements (x[m] = 0,
    x[m] = row) is a where; integer indices (and a constant mask, as its
    positions) write rows of x flattened over the indexed axes
    (_indexed_rows): a scatter_add with accumulate, else each row takes its
    last writer's values (_put_rows)."""
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    accumulate = bool(arg(args, kwargs, 3, "accumulate", False))
    indices = list(args[1])
    values = args[2]
    if x.rank == 0:
        raise TraceError("index_put on a 0-dim tensor")
    # A bool or uint8 mask covers as many axes as it has; constant masks
    # become their positions.
    expanded = []
    for t in indices:
        if t is not None and c.is_const(t):
            v = torch.as_tensor(c.const_value(t))
            if v.dtype in (torch.bool, torch.uint8):
                expanded.extend(v.nonzero().unbind(1))
                continue
            expanded.append(v)
        elif t is not None and c.v(t).dtype in (torch.bool, torch.uint8):
            expanded.append(("mask", c.v(t)))
        else:
            expanded.append(t)
    masks = [i for i, t in enumerate(expanded) if isinstance(t, tuple)]
    if masks:
        if len(masks) > 1 or any(t is not None for i, t in enumerate(expanded) if i not in masks):
            raise TraceError("index_put with a boolean mask from the data beside other "
                             "indices: the written positions' count depends on the data")
        return _put_masked(c, x, masks[0], expanded[masks[0]][1], values, accumulate)
    given = [d for d, t in enumerate(expanded) if t is not None]
    idx = [c.w.constant(t.to(torch.int64)) if isinstance(t, torch.Tensor) else c.v(t)
           for t in (expanded[d] for d in given)]
    rows, position, perm = _indexed_rows(c, x, given, idx)
    # values broadcast to x[indices]'s shape, its block moved to the front
    block, lead = position.shape, _block_lead(given)
    rest = rows.shape[1:]
    target = rest[:lead] + block + rest[lead:]
    v = c.broadcast_to(c.operand(values, dtype), target)
    if lead:
        k = len(block)
        v = c.transpose(v, list(range(lead, lead + k)) + list(range(lead))
                        + list(range(lead + k, v.rank)))
    n = position.numel
    v = c.reshape(v, (n,) + rest)
    position = c.reshape(position, (n,))
    y = _put_rows(c, rows, position, v, accumulate, c.is_const(values))
    y = c.reshape(y, tuple(x.shape[d] for d in perm))
    return c.transpose(y, [perm.index(d) for d in range(x.rank)])


@lowers("aten.put")
def _put(c, node, args, kwargs):
    """put(x, index, source, accumulate): index_put on x flattened."""
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    index = c.v(args[1])
    accumulate = bool(arg(args, kwargs, 3, "accumulate", False))
    flat = c.reshape(x, (x.numel,))
    n = index.numel
    position = c.reshape(B(c).wrapped(index, x.numel), (n,))
    source = c.reshape(c.cast(c.v(args[2]), dtype), (n,))
    y = _put_rows(c, flat, position, source, accumulate, c.is_const(args[2]))
    return c.reshape(y, shape)


def _put_rows(c, rows, position, v, accumulate, constant):
    """rows [N, rest...] with v's rows [n, rest...] written at position [n]:
    added (accumulate), else each written row takes its last writer's
    values, as the CPU's loop in order leaves them. The values' gradient is
    PyTorch's (the result's gradient at each position, for every writer,
    an overwritten duplicate too): the forward's gather reads v behind
    stop_gradient, and a scatter_add of v - stop_gradient(v) (zeros)
    carries it."""
    b = B(c)
    if position.numel == 0:
        return rows
    if accumulate:
        return c.emit("fsdp.scatter_add", [rows, position, v], [(rows.shape, rows.dtype)],
                      {"axis": i64_attr(0)})
    n_rows = rows.shape[0]
    written, writer = _last_writer(c, position, n_rows)
    value = _every_writer(
        c, v, constant, lambda held: b.gather(held, writer, 0),
        lambda z: c.emit("fsdp.scatter_add", [c.w.splat(0, rows.shape, v.dtype), position, z],
                         [(rows.shape, v.dtype)], {"axis": i64_attr(0)}))
    mask = c.reshape(written, (n_rows,) + (1,) * (rows.rank - 1))
    return b.where(mask, value, rows)


@lowers("aten.max_unpool2d", "aten.max_unpool3d")
def _max_unpool(c, node, args, kwargs):
    """x's values written at their indices (max pooling's: flat positions
    within each map of the output), zeros elsewhere: _put_rows over the
    output flattened, each map's indices offset to its rows, so a position
    written twice keeps its last writer and every writer gets the gradient
    at its position, as PyTorch's backward gives it. An index past its map
    is PyTorch's error and not checked here."""
    shape, dtype = c.out()
    k = 3 if "3d" in str(node.target) else 2
    x = c.cast(c.v(args[0]), dtype)
    index = c.cast(c.v(args[1]), torch.int64)
    maps, size, n = math.prod(shape[:-k]), math.prod(shape[-k:]), math.prod(x.shape[-k:])
    offset = c.w.constant((torch.arange(maps, dtype=torch.int64) * size).reshape(maps, 1))
    position = c.reshape(B(c).add(c.reshape(index, (maps, n)), offset), (maps * n,))
    rows = c.w.splat(0, (maps * size,), dtype)
    y = _put_rows(c, rows, position, c.reshape(x, (maps * n,)), False, c.is_const(args[0]))
    return c.reshape(y, shape)


@lowers("aten.masked_scatter")
def _masked_scatter(c, node, args, kwargs):
    """x.masked_scatter(mask, source): the positions where the mask (x and
    the mask broadcast together) holds take source's elements in row-major order. Each one's rank
    among them is a running count of the mask (cumulative_sum over x
    flattened), read from source flattened by a gather; elsewhere, x. A
    mask holding more positions than source has elements is fsdp-run's
    error (the gather's index out of range), as it is PyTorch's."""
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    source = c.cast(c.v(args[2]), dtype)
    n = math.prod(shape)
    if source.numel == 0 or n == 0:  # no position may be masked
        return x
    mask = c.reshape(c.broadcast_to(c.cast(c.v(args[1]), torch.bool), shape), (n,))
    rank = cumulative_sum(c, c.cast(mask, torch.int64), 0)
    index = b.where(mask, b.sub(rank, 1), c.w.splat(0, (n,), torch.int64))
    value = b.gather(c.reshape(source, (source.numel,)), index, 0)
    x = c.reshape(c.broadcast_to(x, shape), (n,))
    return c.reshape(b.where(mask, value, x), shape)


def _put_masked(c, x, at, mask, values, accumulate):
    """x[.., mask, ..] = values with the mask from the data, covering axes
    at..at+mask.rank: values must broadcast over the selected elements
    (their axis of them 1 or absent), so the write is a where (with
    accumulate, x plus the values where the mask holds)."""
    b = B(c)
    k = mask.rank
    if x.shape[at:at + k] != mask.shape:
        raise TraceError(f"index_put: a mask of shape {list(mask.shape)} over axes of "
                         f"{list(x.shape[at:at + k])}")
    v = c.operand(values, x.dtype)
    selected = x.shape[:at] + (-1,) + x.shape[at + k:]  # -1: the count of selected
    from_right = len(selected) - 1 - at
    if v.rank > from_right:
        if v.shape[v.rank - 1 - from_right] != 1:
            raise TraceError(f"index_put: values of shape {list(v.shape)} with one value per "
                             f"selected element (a boolean mask from the data selects a count "
                             f"the data decides); values that broadcast (x[mask] = 0) trace")
        v = c.reshape(v, v.shape[:v.rank - 1 - from_right] + v.shape[v.rank - from_right:])
    # v now broadcasts against x.shape[:at] + x.shape[at + k:]: put the mask's
    # axes back as ones
    tail = v.shape[v.rank - from_right:] if from_right else ()
    head = v.shape[:v.rank - from_right] if from_right else v.shape
    v = c.reshape(v, head + (1,) * k + tail)
    m = c.reshape(c.cast(mask, torch.bool), (1,) * at + mask.shape + (1,) * (x.rank - at - k))
    if accumulate:
        return b.add(x, b.where(m, v, 0.0))
    return b.where(m, v, x)


@lowers("aten.scatter_reduce")
def _scatter_reduce(c, node, args, kwargs):
    """scatter_reduce (include_self or not): 'sum' and 'mean' are
    scatter_adds of the values and their counts at index's flat positions;
    'prod', 'amax' and 'amin' reduce each position's values found by
    comparing the positions with index's (_reduce_at). A position nothing
    is scattered to keeps x."""
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    index, src = c.v(args[2]), c.cast(c.v(args[3]), dtype)
    return scatter_reduce(c, x, dim(args[1], max(x.rank, 1)), index, src,
                          arg(args, kwargs, 4, "reduce"),
                          bool(arg(args, kwargs, 5, "include_self", True)))


@lowers("aten.index_reduce")
def _index_reduce(c, node, args, kwargs):
    """index_reduce(x, d, index, source, reduce): source's slices along d
    reduced into x's at index, a scatter_reduce with index broadcast over
    source's other axes."""
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    src = c.cast(c.v(args[3]), dtype)
    d = dim(args[1], max(x.rank, 1))
    index = c.v(args[2])
    if src.rank:
        at = tuple(src.shape[d] if i == d else 1 for i in range(src.rank))
        index = c.emit("fsdp.broadcast", [c.reshape(index, at)], [(src.shape, index.dtype)])
    return scatter_reduce(c, x, d, index, src, arg(args, kwargs, 4, "reduce"),
                          bool(arg(args, kwargs, 5, "include_self", True)))


def scatter_reduce(c, x, d, index, src, reduce, include):
    b = B(c)
    shape, dtype = x.shape, x.dtype
    if reduce not in ("sum", "mean", "prod", "amax", "amin"):
        raise TraceError(f"scatter_reduce with reduce='{reduce}'")
    if index.numel == 0:
        return c.reshape(x, shape)
    if x.rank == 0:  # as one element along one axis
        x, index, src = (c.reshape(v, (1,)) for v in (x, index, src))
    if src.shape != index.shape:  # only the part of src that index covers
        for axis, n in enumerate(index.shape):
            src = b.slice(src, axis, 0, n)
    lin = c.reshape(_linear_index(c, x, index, d), (index.numel,))
    flat = c.reshape(x, (x.numel,))
    if reduce in ("prod", "amax", "amin"):
        return c.reshape(_reduce_at(c, flat, lin, c.reshape(src, (index.numel,)), reduce,
                                    include), shape)

    def scattered(values):
        zeros = c.w.splat(0, (x.numel,), dtype)
        return c.emit("fsdp.scatter_add", [zeros, lin, c.reshape(values, (index.numel,))],
                      [((x.numel,), dtype)], {"axis": i64_attr(0)})
    total = scattered(src)
    count = scattered(c.w.splat(1, index.shape, dtype))
    touched = b.gt(count, 0.0)
    if include:
        total = b.add(total, flat)
        count = b.add(count, 1.0)
    if reduce == "mean":
        total = b.div(total, b.where(touched, count, 1.0))
    return c.reshape(b.where(touched, total, flat), shape)


def _reduce_at(c, flat, lin, src, reduce, include):
    """flat [N] with the values src [n] at positions lin [n] reduced into
    it by 'prod', 'amax' or 'amin' (with flat's own value where include).
    Each position's values are found by comparing lin with the positions,
    an [N, n] mask (bounded as the last writer's). prod: a tree of
    products of the masked values (ones elsewhere), whose gradient is the
    other factors' product, zeros too. amax/amin: the value behind
    stop_gradient, and the gradient shared evenly by the values equal to it,
    as PyTorch's backward shares it (x's own value counted among them even
    where not included, then given no share)."""
    b = B(c)
    from .reductions import _tree_product
    n_rows, n = flat.shape[0], lin.shape[0]
    if n_rows * n > LAST_WRITER_LIMIT:
        raise TraceError(f"scatter_reduce '{reduce}' of {n} values into {n_rows} positions: "
                         f"the positions are compared with every value ({n_rows * n} pairs, "
                         f"at most {LAST_WRITER_LIMIT})")
    rows = c.w.constant(torch.arange(n_rows, dtype=torch.int64).reshape(n_rows, 1))
    here = b.eq(c.reshape(lin, (1, n)), rows)                       # [N, n]
    touched = c.reshape(b.reduce("reduce_max", c.cast(here, flat.dtype), [1], False), (n_rows,))
    touched = b.gt(touched, b.s(0.5, flat.dtype))
    wide = c.reshape(src, (1, n))
    if reduce == "prod":
        y = c.reshape(_tree_product(c, b.where(here, wide, 1.0), 1), (n_rows,))
        if include:
            y = b.mul(y, flat)
        return b.where(touched, y, flat)
    sign = 1.0 if reduce == "amax" else -1.0
    signed = wide if sign > 0 else b.un("neg", wide)
    best = b.reduce("reduce_max", b.where(here, signed, -math.inf), [1], False)
    if include:
        own = flat if sign > 0 else b.un("neg", flat)
        best = b.where(b.gt(own, best), own, best)
    if sign < 0:
        best = b.un("neg", best)
    value = c.emit("fsdp.stop_gradient", [best], [(best.shape, best.dtype)])
    # the gradient: each value equal to the result takes 1/ties of it
    tied = b.eq(src, b.gather(value, lin, 0))                       # [n]
    ties = c.emit("fsdp.scatter_add", [c.w.splat(0, (n_rows,), flat.dtype), lin,
                                       c.cast(tied, flat.dtype)],
                  [((n_rows,), flat.dtype)], {"axis": i64_attr(0)})
    share = c.emit("fsdp.scatter_add", [c.w.splat(0, (n_rows,), flat.dtype), lin,
                                        b.where(tied, src, 0.0)],
                   [((n_rows,), flat.dtype)], {"axis": i64_attr(0)})
    # x's own value counts among the ties even where it is not included
    # (PyTorch's backward counts it so), but takes a share only where it is.
    mine = b.eq(flat, value)
    ties = b.add(ties, c.cast(mine, flat.dtype))
    own = flat if include else c.emit("fsdp.stop_gradient", [flat], [(flat.shape, flat.dtype)])
    share = b.add(share, b.where(mine, own, 0.0))
    mean = b.div(share, b.where(b.gt(ties, b.s(0.5, flat.dtype)), ties, 1.0))
    y = b.add(value, b.sub(mean, c.emit("fsdp.stop_gradient", [mean],
                                        [(mean.shape, mean.dtype)])))
    return b.where(touched, y, flat)
