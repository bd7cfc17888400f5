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
    """x's running sum along d: a product with a triangular matrix up to
    SCAN_LIMIT, a Hillis-Steele scan past it and for integers at any length
    (their additions are exact in int64; through a float32 product a
    position past 2^24 would round)."""
    n = x.shape[d]
    if n > SCAN_LIMIT or not x.dtype.is_floating_point:
        return B(c).scan(x, d, "add", 0)
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


@lowers("aten.as_strided_scatter")
def _as_strided_scatter(c, node, args, kwargs):
    """x with a strided view of its elements replaced by src (the
    functional form of writing through as_strided). A view that reaches
    an element twice is refused: which write stays is the storage's
    order, not the view's."""
    x, src = c.v(args[0]), c.v(args[1])
    size, stride = [int(v) for v in args[2]], [int(v) for v in args[3]]
    offset = int(arg(args, kwargs, 4, "storage_offset", 0) or 0)
    reached = torch.zeros(x.numel, dtype=torch.int64)
    reached.as_strided(size, stride, offset).add_(1)  # (add_ counts repeats)
    if reached.numel() and int(reached.max()) > 1:
        raise TraceError("as_strided_scatter through a view that reaches an element twice")
    return _embed(c, x, src, lambda t: t.as_strided(size, stride, offset))


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
