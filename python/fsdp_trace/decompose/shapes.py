"""Shapes and indexing as compositions of fsdp ops: index maps that depend
only on shapes are gathers (or scatters) with a constant index; scans are
products with a triangular constant."""
import math

import torch

from ..lower import TraceError, dim, lowers
from ..mlir import i64_attr
from .builder import B, arg, float_in

# -- shapes and indexing -----------------------------------------------------------


@lowers("aten.stack")
def _stack(c, node, args, kwargs):
    shape, dtype = c.out()
    d = dim(arg(args, kwargs, 1, "dim", 0), len(shape))
    parts = [c.cast(c.v(t), dtype) for t in args[0]]
    parts = [c.reshape(p, p.shape[:d] + (1,) + p.shape[d:]) for p in parts]
    return B(c).concat(parts, d) if len(parts) > 1 else parts[0]


@lowers("aten.flip")
def _flip(c, node, args, kwargs):
    x = c.v(args[0])
    for d in sorted({dim(d, x.rank) for d in args[1]}):
        x = B(c).gather(x, torch.arange(x.shape[d] - 1, -1, -1), d)
    return x


@lowers("aten.roll")
def _roll(c, node, args, kwargs):
    x = c.v(args[0])
    shifts = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
    dims = arg(args, kwargs, 2, "dims", [])
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    shape = x.shape
    if not dims:
        x = c.reshape(x, (x.numel,))
        dims = [0]
    for s, d in zip(shifts, dims):
        d = dim(d, x.rank)
        n = x.shape[d]
        x = B(c).gather(x, (torch.arange(n) - int(s)) % max(n, 1), d)
    return c.reshape(x, shape)


@lowers("aten.repeat")
def _repeat(c, node, args, kwargs):
    x = c.v(args[0])
    reps = [int(r) for r in args[1]]
    shape = (1,) * (len(reps) - x.rank) + x.shape
    x = c.reshape(x, tuple(d for s in shape for d in (1, s)))
    full = tuple(d for r, s in zip(reps, shape) for d in (r, s))
    if x.shape != full:
        x = c.emit("fsdp.broadcast", [x], [(full, x.dtype)])
    return c.reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def pad(c, x, axis, low, high, value=0):
    """x padded with `value` along axis, `low` before and `high` after (a
    negative amount crops)."""
    b = B(c)
    x = b.slice(x, axis, max(-low, 0), x.shape[axis] - max(-high, 0))
    parts = []
    for n in (low, None, high):
        if n is None:
            parts.append(x)
        elif n > 0:
            s = list(x.shape)
            s[axis] = n
            parts.append(c.w.splat(value, tuple(s), x.dtype))
    return b.concat(parts, axis)


@lowers("aten.constant_pad_nd")
def _constant_pad(c, node, args, kwargs):
    x = c.v(args[0])
    widths = [int(p) for p in args[1]]
    value = arg(args, kwargs, 2, "value", 0)
    for i in range(len(widths) // 2):
        x = pad(c, x, x.rank - 1 - i, widths[2 * i], widths[2 * i + 1], value)
    return x


def _pad_index(n, before, after, mode):
    i = torch.arange(-before, n + after)
    if mode == "reflect":
        period = 2 * (n - 1)
        i = i.abs() % max(period, 1)
        return torch.where(i >= n, period - i, i)
    if mode == "replicate":
        return i.clamp(0, n - 1)
    return i % n  # circular


@lowers("aten.reflection_pad1d", "aten.reflection_pad2d", "aten.reflection_pad3d",
        "aten.replication_pad1d", "aten.replication_pad2d", "aten.replication_pad3d")
def _index_pad(c, node, args, kwargs):
    x = c.v(args[0])
    pad = [int(p) for p in args[1]]
    mode = "reflect" if "reflection" in str(node.target) else "replicate"
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        x = B(c).gather(x, _pad_index(x.shape[d], pad[2 * i], pad[2 * i + 1], mode), d)
    return x


@lowers("aten.pixel_shuffle", "aten.pixel_unshuffle")
def _pixel_shuffle(c, node, args, kwargs):
    x = c.v(args[0])
    r = int(args[1])
    *lead, ch, h, w = x.shape
    n = len(lead)
    if "unshuffle" in str(node.target):
        y = c.reshape(x, tuple(lead) + (ch, h // r, r, w // r, r))
        y = c.transpose(y, list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    else:
        y = c.reshape(x, tuple(lead) + (ch // (r * r), r, r, h, w))
        y = c.transpose(y, list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return c.reshape(y, c.out()[0])


@lowers("aten.unfold")
def _unfold(c, node, args, kwargs):
    """Tensor.unfold(dim, size, step): windows along `dim`, the window's
    elements a new last axis."""
    x = c.v(args[0])
    d = dim(args[1], x.rank)
    size, step = int(args[2]), int(args[3])
    count = (x.shape[d] - size) // step + 1 if x.rank else 1
    if x.rank == 0:
        return c.reshape(x, (1,))
    index = torch.arange(count)[:, None] * step + torch.arange(size)[None, :]
    y = B(c).gather(x, index, d)  # ... count, size ...
    perm = [i for i in range(y.rank) if i != d + 1] + [d + 1]
    return c.transpose(y, perm)


@lowers("aten.zero")
def _zero(c, node, args, kwargs):
    shape, dtype = c.out()
    return c.w.splat(0, shape, dtype)


@lowers("aten.zeros_like", "aten.ones_like", "aten.full_like", "aten.empty_like",
        "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.new_empty", "aten.empty",
        "aten.zeros", "aten.ones", "aten.full", "aten.scalar_tensor")
def _filled(c, node, args, kwargs):
    """A tensor of one value whose shape comes from an input's: a constant."""
    from ..lower import fill_value
    shape, dtype = c.out()
    name = node.target.overloadpacket.__name__
    value = 0 if name.startswith("empty") or name == "new_empty" else fill_value(node)
    return c.w.splat(value, shape, dtype)


@lowers("aten.fill")
def _fill(c, node, args, kwargs):
    shape, dtype = c.out()
    value = args[1]
    if hasattr(value, "op"):  # fill.Tensor: a 0-dim tensor's value everywhere
        v = c.cast(c.v(value), dtype)
        return c.emit("fsdp.broadcast", [c.reshape(v, ())], [(shape, dtype)])
    return c.w.splat(value, shape, dtype)


@lowers("aten.detach")
def _detach(c, node, args, kwargs):
    """No gradient flows through: fsdp.stop_gradient (the identity where
    none could: a constant, an integer or boolean value)."""
    x = c.v(args[0])
    if c.is_const(args[0]) or not x.dtype.is_floating_point:
        return x
    return c.emit("fsdp.stop_gradient", [x], [(x.shape, x.dtype)])


@lowers("aten.slice_scatter")
def _slice_scatter(c, node, args, kwargs):
    """x with x[start:end] along dim replaced by src (step 1): a concat."""
    b = B(c)
    x, src = c.v(args[0]), c.v(args[1])
    d = dim(arg(args, kwargs, 2, "dim", 0), x.rank)
    start, end, step = (arg(args, kwargs, 3, "start"), arg(args, kwargs, 4, "end"),
                        arg(args, kwargs, 5, "step", 1))
    start, end, step = slice(start, end, step).indices(x.shape[d])
    if step != 1:
        return _embed(c, x, src, lambda t: t[(slice(None),) * d + (slice(start, end, step),)])
    src = c.cast(src, x.dtype)
    return b.concat([b.slice(x, d, 0, start), src, b.slice(x, d, max(end, start), x.shape[d])], d)


@lowers("aten.rot90")
def _rot90(c, node, args, kwargs):
    x = c.v(args[0])
    k = int(arg(args, kwargs, 1, "k", 1)) % 4
    dims = [dim(d, x.rank) for d in arg(args, kwargs, 2, "dims", [0, 1])]
    perm = list(range(x.rank))
    perm[dims[0]], perm[dims[1]] = perm[dims[1]], perm[dims[0]]
    if k == 1:
        return c.transpose(B(c).gather(x, torch.arange(x.shape[dims[1]] - 1, -1, -1), dims[1]),
                           perm)
    if k == 2:
        for d in dims:
            x = B(c).gather(x, torch.arange(x.shape[d] - 1, -1, -1), d)
        return x
    if k == 3:
        y = c.transpose(x, perm)
        return B(c).gather(y, torch.arange(y.shape[dims[1]] - 1, -1, -1), dims[1])
    return x


@lowers("aten.index_select")
def _index_select(c, node, args, kwargs):
    x = c.v(args[0])
    d = dim(args[1], x.rank)
    idx = c.v(args[2])
    if x.rank == 0:
        return x
    return B(c).gather(x, c.reshape(idx, (idx.numel,)), d)


def _linear_index(c, x, index, d):
    """The flat positions in x of torch.gather(x, d, index)'s elements: each
    index value times x's stride along d, plus the position along the other
    axes (a constant of index's shape)."""
    b = B(c)
    strides = [math.prod(x.shape[i + 1:]) for i in range(x.rank)]
    base = torch.zeros(index.shape, dtype=torch.int64)
    for i, n in enumerate(index.shape):
        if i != d:
            shape = [1] * len(index.shape)
            shape[i] = n
            base = base + torch.arange(n).reshape(shape) * strides[i]
    idx = c.cast(index, torch.int64)
    # torch.gather refuses a negative index (take_along_dim's are wrapped
    # before this).
    return b.add(b.mul(idx, b.s(strides[d], torch.int64)), c.w.constant(base))


@lowers("aten.gather", "aten.take_along_dim")
def _gather(c, node, args, kwargs):
    x = c.v(args[0])
    take = "take_along_dim" in str(node.target)
    if take:
        index, d = c.v(args[1]), arg(args, kwargs, 2, "dim")
        if d is None:
            x = c.reshape(x, (x.numel,))
            index = c.reshape(index, (index.numel,))
            d = 0
        d = dim(d, x.rank)
        shape = list(torch.broadcast_shapes(torch.Size(x.shape[:d] + (1,) + x.shape[d + 1:]),
                                            torch.Size(index.shape[:d] + (1,) + index.shape[d + 1:])))
        xs, ishape = list(shape), list(shape)
        xs[d], ishape[d] = x.shape[d], index.shape[d]
        if tuple(xs) != x.shape:
            x = c.emit("fsdp.broadcast", [x], [(tuple(xs), x.dtype)])
        if tuple(ishape) != index.shape:
            index = c.emit("fsdp.broadcast", [index], [(tuple(ishape), index.dtype)])
        # take_along_dim counts a negative index from the end (torch 2.x;
        # 1.13 refuses one, as torch.gather does).
        index = B(c).wrapped(index, x.shape[d])
    else:
        d, index = dim(args[1], max(x.rank, 1)), c.v(args[2])
    if x.rank == 0:
        return c.reshape(x, c.out()[0])
    return take_along(c, x, index, d)


def take_along(c, x, index, d):
    """x's elements at `index` along axis d (torch.gather): one flat gather
    at their linear positions, so the gradient is a scatter-add."""
    lin = _linear_index(c, x, index, d)
    flat = c.reshape(x, (x.numel,))
    y = B(c).gather(flat, c.reshape(lin, (lin.numel,)), 0)
    return c.reshape(y, tuple(index.shape))


def _last_writer(c, index, n):
    """For each of n positions along an axis, the last k with index[k] at
    it (negative indices count from the end), or -1: (written [n] bool,
    k [n] int64 clamped to 0 where unwritten). The CPU's index_copy and
    index_fill loop in order, so the last write is the one that stays."""
    b = B(c)
    idx = b.wrapped(c.reshape(index, (index.numel,)), n)
    here = b.eq(c.reshape(idx, (1, index.numel)),
                c.w.constant(torch.arange(n, dtype=torch.int64).reshape(n, 1)))
    k = c.w.constant(torch.arange(index.numel, dtype=torch.float32).reshape(1, index.numel))
    last = b.reduce("reduce_max", b.where(here, k, -1.0), [1], False)
    written = b.gt(last, b.s(-0.5, torch.float32))
    return written, c.cast(b.where(written, last, 0.0), torch.int64)


@lowers("aten.index_fill", "aten.index_copy")
def _index_fill_copy(c, node, args, kwargs):
    """index_fill(x, d, index, value): the slices at index set to value;
    index_copy(x, d, index, source): to source's slices (the last one where
    an index repeats). A where over a per-position mask, so x's gradient is
    zero in the replaced slices and source's reaches the slices kept."""
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    if x.rank == 0:
        x = c.reshape(x, (1,))
    d = dim(args[1], x.rank)
    n = x.shape[d]
    written, src = _last_writer(c, c.v(args[2]), n)
    at = tuple(n if i == d else 1 for i in range(x.rank))
    mask = c.reshape(written, at)
    if "index_copy" in str(node.target):
        source = c.cast(c.v(args[3]), dtype)
        if source.rank == 0:
            source = c.reshape(source, (1,))
        value = b.gather(source, src, d)
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
    gathered element or x's. reduce='add' is scatter_add; 'multiply' is
    refused."""
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
    n, k = x.shape[d], index.shape[d]
    # here[.., j, p, ..]: index[.., j, ..] == p
    idx = b.wrapped(index, n)
    here = b.eq(c.reshape(idx, index.shape[:d] + (k, 1) + index.shape[d + 1:]),
                c.w.constant(torch.arange(n, dtype=torch.int64).reshape(
                    (1,) * (d + 1) + (n,) + (1,) * (x.rank - d - 1))))
    pos = c.w.constant(torch.arange(k, dtype=torch.float32).reshape(
        (1,) * d + (k, 1) + (1,) * (x.rank - d - 1)))
    last = b.reduce("reduce_max", b.where(here, pos, -1.0), [d], False)  # [.., n, ..]
    written = b.gt(last, b.s(-0.5, torch.float32))
    src_arg = args[3]
    if isinstance(src_arg, torch.fx.Node):
        src = c.cast(c.v(src_arg), dtype)
        if src.rank == 0:
            src = c.reshape(src, (1,))
        for axis, m in enumerate(index.shape):  # only the part index covers
            src = b.slice(src, axis, 0, m)
        value = take_along(c, src, c.cast(b.where(written, last, 0.0), torch.int64), d)
    else:
        value = c.operand(src_arg, dtype)
    # Beyond index's extent on the other axes, x is untouched.
    for axis in range(x.rank):
        extra = x.shape[axis] - written.shape[axis]
        if axis != d and extra > 0:
            pad_shape = list(written.shape)
            pad_shape[axis] = extra
            written = b.concat([written, c.w.splat(False, tuple(pad_shape), torch.bool)], axis)
            if hasattr(value, "shape") and value.rank:
                vs = list(value.shape)
                vs[axis] = extra
                value = b.concat([value, c.w.splat(0.0, tuple(vs), dtype)], axis)
    return c.reshape(b.where(written, value, x), shape)


def _select(c, x, pick):
    """The elements of x that `pick` (a function of a tensor of x's shape)
    selects, as one gather with a constant index: pick is applied to the
    positions of x's elements (diagonal, as_strided, constant indexing)."""
    positions = torch.arange(x.numel, dtype=torch.int64).reshape(x.shape)
    if x.numel == 0:  # nothing to select: an empty (or all-empty) result
        return c.w.splat(0, c.out()[0], x.dtype)
    index = pick(positions)
    if isinstance(index, torch.Tensor) and index.dtype == torch.int64:
        y = B(c).gather(c.reshape(x, (x.numel,)), index.reshape(-1).contiguous(), 0)
        return c.reshape(y, tuple(index.shape))
    raise TraceError("an index map that is not a selection of elements")


def _place(c, x, out_shape, place):
    """x's elements written where `place` (a function of a tensor of x's
    shape, giving a tensor of out_shape) puts them, zeros elsewhere: one
    scatter_add into zeros with a constant index (diag_embed)."""
    marks = place(torch.arange(1, x.numel + 1, dtype=torch.int64).reshape(x.shape)).reshape(-1)
    where = torch.nonzero(marks).reshape(-1)
    order = torch.argsort(marks[where])
    index = c.w.constant(where[order])
    zeros = c.w.splat(0, (math.prod(out_shape),), x.dtype)
    y = c.emit("fsdp.scatter_add", [zeros, index, c.reshape(x, (x.numel,))],
               [((math.prod(out_shape),), x.dtype)], {"axis": i64_attr(0)})
    return c.reshape(y, tuple(out_shape))


@lowers("aten.diagonal")
def _diagonal(c, node, args, kwargs):
    x = c.v(args[0])
    offset = int(arg(args, kwargs, 1, "offset", 0))
    d1, d2 = int(arg(args, kwargs, 2, "dim1", 0)), int(arg(args, kwargs, 3, "dim2", 1))
    return _select(c, x, lambda t: t.diagonal(offset, d1, d2))


@lowers("aten.as_strided")
def _as_strided(c, node, args, kwargs):
    """A strided view of x's elements (functionalized values are
    contiguous): ConvNeXt's and Swin's windows."""
    x = c.v(args[0])
    size, stride = [int(v) for v in args[1]], [int(v) for v in args[2]]
    offset = int(arg(args, kwargs, 3, "storage_offset", 0) or 0)
    return _select(c, x, lambda t: t.as_strided(size, stride, offset))


@lowers("aten.diag_embed")
def _diag_embed(c, node, args, kwargs):
    x = c.v(args[0])
    offset = int(arg(args, kwargs, 1, "offset", 0))
    d1, d2 = int(arg(args, kwargs, 2, "dim1", -2)), int(arg(args, kwargs, 3, "dim2", -1))
    return _place(c, x, c.out()[0], lambda t: torch.diag_embed(t, offset, d1, d2))


@lowers("aten.index")
def _index(c, node, args, kwargs):
    """x[idx] (advanced indexing): every index tensor a constant, one
    constant gather (nn.functional.unfold's); else one integer index tensor
    along one axis."""
    x = c.v(args[0])
    indices = list(args[1])
    given = [i for i, t in enumerate(indices) if t is not None]
    if all(c.is_const(indices[i]) for i in given):
        values = [slice(None) if t is None else c.const_value(t) for t in indices]
        if any(isinstance(v, torch.Tensor) and v.dtype == torch.bool for v in values):
            raise TraceError("aten.index with a boolean mask: the result's shape depends on the data")
        return _select(c, x, lambda t: t[tuple(values)])
    idx = [c.v(indices[d]) for d in given]
    if any(i.dtype == torch.bool for i in idx):
        raise TraceError("aten.index with a boolean mask: the result's shape depends on the data")
    if len(given) == 1:
        return c.reshape(B(c).gather(x, idx[0], given[0]), c.out()[0])
    return _index_many(c, x, given, idx)


def _indexed_rows(c, x, given, idx):
    """x with the axes `given` (indexed by the int tensors idx) moved to the
    front and flattened into one, and each index element's row in it: the
    row-major position Σ i_k · stride_k (negative values counted from the
    end, the indices broadcast together). Returns (rows [N, rest...],
    position [the indices' broadcast shape], the permutation applied)."""
    b = B(c)
    rest = [d for d in range(x.rank) if d not in given]
    moved = c.transpose(x, given + rest)
    sizes = [x.shape[d] for d in given]
    rows = c.reshape(moved, (math.prod(sizes),) + tuple(x.shape[d] for d in rest))
    position, stride = None, 1
    for n, i in reversed(list(zip(sizes, idx))):
        i = b.wrapped(i, n)
        term = i if stride == 1 else b.mul(i, stride)
        position = term if position is None else b.add(term, position)
        stride *= n
    return rows, position, given + rest


def _block_lead(given):
    """How many of x's axes come before the indexed block in x[indices]:
    PyTorch puts the block where the first indexed axis was when the
    indexed axes are adjacent, in front otherwise."""
    adjacent = given == list(range(given[0], given[0] + len(given)))
    return given[0] if adjacent else 0


def _index_many(c, x, given, idx):
    """x[i0, i1, ...] with several index tensors: a gather along the
    flattened indexed axes (_indexed_rows), its block placed as PyTorch
    places it (_block_lead)."""
    rows, position, _ = _indexed_rows(c, x, given, idx)
    y = B(c).gather(rows, position, 0)
    block, lead = position.rank, _block_lead(given)
    if lead:
        y = c.transpose(y, list(range(block, block + lead)) + list(range(block))
                        + list(range(block + lead, y.rank)))
    return c.reshape(y, c.out()[0])


# Writes at indices from the data without accumulating find each row's last
# writer through an [rows, index elements] comparison: bounded.
LAST_WRITER_LIMIT = 1 << 22


@lowers("aten.index_put", "aten._unsafe_index_put")
def _index_put(c, node, args, kwargs):
    """x[indices] = values (with accumulate, +=). A boolean mask from the
    data with values that broadcast over the selected elements (x[m] = 0,
    x[m] = row) is a where; integer indices (and a constant mask, as its
    positions) write rows of x flattened over the indexed axes
    (_indexed_rows): a scatter_add with accumulate, else each row takes its
    last writer's values (_put_rows)."""
    b = B(c)
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
    v = _broadcast_to(c, c.operand(values, dtype), target)
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


def _broadcast_to(c, v, shape):
    if v.shape == tuple(shape):
        return v
    if tuple(torch.broadcast_shapes(torch.Size(v.shape), torch.Size(shape))) != tuple(shape):
        raise TraceError(f"{c.node.target}: an operand of shape {list(v.shape)} does not "
                         f"broadcast to {list(shape)}")
    v = c.reshape(v, (1,) * (len(shape) - v.rank) + v.shape)
    return c.emit("fsdp.broadcast", [v], [(tuple(shape), v.dtype)])


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
    n_rows, n = rows.shape[0], position.numel
    if n_rows * n > LAST_WRITER_LIMIT:
        raise TraceError(f"index_put without accumulate at {n} positions from the data "
                         f"into {n_rows} rows: finding each row's last writer compares "
                         f"them all ({n_rows * n} pairs, at most {LAST_WRITER_LIMIT})")
    written, writer = _last_writer(c, position, n_rows)
    held = v if constant or not v.dtype.is_floating_point else \
        c.emit("fsdp.stop_gradient", [v], [(v.shape, v.dtype)])
    value = b.gather(held, writer, 0)
    if held is not v:
        zero = b.sub(v, held)
        value = b.add(value, c.emit("fsdp.scatter_add",
                                    [c.w.splat(0, rows.shape, v.dtype), position, zero],
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
    mask = c.reshape(_broadcast_to(c, c.cast(c.v(args[1]), torch.bool), shape), (n,))
    rank = cumulative_sum(c, c.cast(mask, torch.int64), 0)
    index = b.where(mask, b.sub(rank, 1), c.w.splat(0, (n,), torch.int64))
    value = b.gather(c.reshape(source, (source.numel,)), index, 0)
    x = c.reshape(_broadcast_to(c, x, shape), (n,))
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


# Scans up to SCAN_LIMIT long are products with a constant triangular
# matrix along the axis (one GEMM); longer ones (position ids from a mask
# at T = 8192) Hillis-Steele scans (B.scan), whose log2(n) steps need no n²
# constant. cummax and cummin stay bounded: their n² view is what gives the
# gradient to the maximum's element.
SCAN_LIMIT = 2048


def _scan_matrix(n):
    if n > SCAN_LIMIT:
        raise TraceError(f"a cumulative maximum or minimum over {n} elements (at most "
                         f"{SCAN_LIMIT}: it compares every pair of positions)")
    return torch.triu(torch.ones(n, n))


def cumulative_sum(c, x, d):
    """x's running sum along d (integers summed as integers past the
    matrix's bound, in float32 within it)."""
    n = x.shape[d]
    if n > SCAN_LIMIT:
        return B(c).scan(x, d, "add", 0)
    if not x.dtype.is_floating_point:  # integer positions from a mask
        return c.cast(B(c).along(c.cast(x, torch.float32), d, _scan_matrix(n)), x.dtype)
    return B(c).along(x, d, _scan_matrix(n))


@lowers("aten.cumsum")
def _cumsum(c, node, args, kwargs):
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    if x.rank == 0:
        return x
    return cumulative_sum(c, x, dim(args[1], x.rank))


@lowers("aten.cummax", "aten.cummin")
def _cummax(c, node, args, kwargs):
    """values[i] = max over j <= i of x[j] along d, as a reduce_max over an
    [.., n, n, ..] view of x with the later positions hidden (-inf), so the
    gradient goes to the maximum's element; indices: the last j holding it
    (torch's choice on ties). cummin is -cummax(-x). n² elements: bounded
    as the scans are."""
    b = B(c)
    is_max = "cummax" in str(node.target)
    x = c.v(args[0])
    shape = x.shape
    if x.rank == 0:
        return [x, c.w.constant(torch.zeros((), dtype=torch.int64))]
    d = dim(arg(args, kwargs, 1, "dim"), x.rank)
    n = x.shape[d]
    _scan_matrix(n)  # the bound
    if not is_max:
        x = b.un("neg", x)
    wide = shape[:d] + (n, n) + shape[d + 1:]           # [.., i, j, ..]
    xj = c.emit("fsdp.broadcast", [c.reshape(x, shape[:d] + (1, n) + shape[d + 1:])],
                [(wide, x.dtype)])
    later = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)  # j > i
    hide = c.w.constant(later.reshape((1,) * d + (n, n) + (1,) * (x.rank - d - 1)))
    m = b.where(hide, -math.inf, xj)
    values = b.reduce("reduce_max", m, [d + 1], False)
    at = b.eq(m, c.reshape(values, shape[:d] + (n, 1) + shape[d + 1:]))
    pos = c.w.constant(torch.arange(n, dtype=torch.float32).reshape(
        (1,) * (d + 1) + (n,) + (1,) * (x.rank - d - 1)))
    index = b.reduce("reduce_max", b.where(at, pos, -1.0), [d + 1], False)
    if not is_max:
        values = b.un("neg", values)
    return [values, c.cast(index, torch.int64)]


@lowers("aten.logcumsumexp")
def _logcumsumexp(c, node, args, kwargs):
    """log(cumsum(exp(x - m))) + m, m the axis's maximum (finite)."""
    b = B(c)
    x = float_in(c, args[0])
    if x.rank == 0:
        return x
    d = dim(args[1], x.rank)
    m = b.reduce("reduce_max", x, [d], True)
    m = b.where(b.eq(b.un("abs", m), math.inf), 0.0, m)
    s = cumulative_sum(c, b.un("exp", b.sub(x, m)), d)
    return b.add(b.un("log", s), m)


# -- selections and placements by a constant index map -----------------------------


@lowers("aten.diag")
def _diag(c, node, args, kwargs):
    """A vector onto a matrix's k-th diagonal, or a matrix's k-th diagonal."""
    x = c.v(args[0])
    k = int(arg(args, kwargs, 1, "diagonal", 0))
    if x.rank == 1:
        return _place(c, x, c.out()[0], lambda t: torch.diag(t, k))
    return _select(c, x, lambda t: torch.diag(t, k))


@lowers("aten.trace")
def _trace(c, node, args, kwargs):
    """The sum of a matrix's diagonal."""
    x = c.v(args[0])
    d = _select(c, x, lambda t: torch.diag(t))
    return B(c).reduce("reduce_sum", d, [0], False)


@lowers("aten.take")
def _take(c, node, args, kwargs):
    """x's elements at flat positions (negative ones counted from the end),
    in the index's shape."""
    b = B(c)
    x = c.v(args[0])
    index = b.wrapped(c.v(args[1]), x.numel)
    y = b.gather(c.reshape(x, (x.numel,)), c.reshape(index, (index.numel,)), 0)
    return c.reshape(y, c.out()[0])


def _embed(c, x, src, view):
    """x with the elements that `view` (a function of a tensor of x's shape
    giving a view of it) selects replaced by src's: src placed there
    (_place) and a constant mask, so x's gradient is zero where src went and
    src's is the placed positions' (select_scatter, diagonal_scatter,
    slice_scatter with a step)."""
    def put(t):
        out = torch.zeros(x.shape, dtype=t.dtype)
        view(out).copy_(t)  # the views write through
        return out
    mask = put(torch.ones(src.shape, dtype=torch.bool))
    placed = _place(c, c.cast(src, x.dtype), x.shape, put)
    return B(c).where(c.w.constant(mask), placed, x)


@lowers("aten.select_scatter")
def _select_scatter(c, node, args, kwargs):
    x, src = c.v(args[0]), c.v(args[1])
    d, i = dim(args[2], x.rank), int(args[3])
    return _embed(c, x, src, lambda t: t.select(d, i))


@lowers("aten.diagonal_scatter")
def _diagonal_scatter(c, node, args, kwargs):
    x, src = c.v(args[0]), c.v(args[1])
    offset = int(arg(args, kwargs, 2, "offset", 0))
    d1, d2 = int(arg(args, kwargs, 3, "dim1", 0)), int(arg(args, kwargs, 4, "dim2", 1))
    return _embed(c, x, src, lambda t: t.diagonal(offset, d1, d2))


@lowers("aten.block_diag")
def _block_diag(c, node, args, kwargs):
    """The tensors (0-D as 1x1, 1-D as one row) along the diagonal of a
    matrix of zeros: each block padded to the total width, then stacked."""
    b = B(c)
    shape, dtype = c.out()
    blocks = []
    for t in args[0]:
        v = c.cast(c.v(t), dtype)
        blocks.append(c.reshape(v, (1,) * (2 - v.rank) + v.shape) if v.rank < 2 else v)
    width, left, rows = sum(v.shape[1] for v in blocks), 0, []
    for v in blocks:
        rows.append(pad(c, v, 1, left, width - left - v.shape[1]))
        left += v.shape[1]
    return c.reshape(b.concat(rows, 0), shape)


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
