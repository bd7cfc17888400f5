"""Complex numbers as rotary embeddings use them: Meta's Llama code,
torchtitan's and Llama 4's rotate queries and keys as complex products
(`torch.polar` builds the rotations, `view_as_complex` pairs a head's
features, `view_as_real` unpairs the product). A plan holds no complex
tensor: a complex tensor of shape S is lowered as a real one of shape
S + (2,), its real and imaginary parts (view_as_real's layout, so the
pairing and unpairing views are free), and each op on it as the real ops
its definition is made of; the gradient is theirs.

What traces: polar, view_as_complex, view_as_real, gather, products (complex by
complex, real or a real number), sums and differences of complex tensors,
division by a real number, and the views and copies between them. Any
other op on a complex tensor is refused naming it (lower.Context.lowering).
"""
import torch

from ..lower import COMPLEX, LOWERINGS, TraceError, dim, is_complex, lowers, op_name
from ..mlir import i64_array, i64_attr
from .builder import B


def complex_lowers(*names):
    return lowers(*names, table=COMPLEX)


def _is_complex(c, a):
    return isinstance(a, torch.fx.Node) and is_complex(c.gm, a)


def _parts(c, z):
    """The real and imaginary parts of a lowered complex value."""
    shape = z.shape[:-1]
    parts = c.emit("fsdp.split", [z], [(shape + (1,), z.dtype)] * 2,
                   {"axis": i64_attr(z.rank - 1), "sizes": i64_array([1, 1])})
    return [c.reshape(p, shape) for p in parts]


def _pack(c, re, im, shape):
    """The lowered complex value of parts `re` and `im` (broadcast to
    `shape`, the complex tensor's)."""
    shape = tuple(shape)
    re = c.reshape(c.broadcast_to(re, shape), shape + (1,))
    im = c.reshape(c.broadcast_to(im, shape), shape + (1,))
    return c.emit("fsdp.concat", [re, im], [(shape + (2,), re.dtype)],
                  {"axis": i64_attr(len(shape))})


@lowers("aten.polar")
@complex_lowers("aten.polar")
def _polar(c, node, args, kwargs):
    """abs·(cos θ + i sin θ)."""
    b = B(c)
    shape, dtype = c.out()
    r, theta = c.cast(c.v(args[0]), dtype), c.cast(c.v(args[1]), dtype)
    return _pack(c, b.mul(r, b.un("cos", theta)), b.mul(r, b.un("sin", theta)), shape[:-1])


@lowers("aten.view_as_complex", "aten.view_as_real")
@complex_lowers("aten.view_as_complex", "aten.view_as_real")
def _pairing(c, node, args, kwargs):
    """Free: a complex tensor is lowered in view_as_real's layout."""
    x = c.v(args[0])
    shape, dtype = c.out()
    if x.shape != tuple(shape):
        raise TraceError(f"{op_name(node.target)}: {list(x.shape)} is not {list(shape)}")
    return c.cast(x, dtype)


@complex_lowers("aten.mul")
def _mul(c, node, args, kwargs):
    """(a + bi)(c + di) = (ac - bd) + (ad + bc)i; a real factor scales both
    parts."""
    b = B(c)
    shape, dtype = c.out()
    x, y = args[0], args[1]
    if not _is_complex(c, x):
        x, y = y, x
    z = c.v(x)
    if _is_complex(c, y):
        (xr, xi), (yr, yi) = _parts(c, z), _parts(c, c.v(y))
        return _pack(c, b.sub(b.mul(xr, yr), b.mul(xi, yi)),
                     b.add(b.mul(xr, yi), b.mul(xi, yr)), shape[:-1])
    if isinstance(y, complex):
        raise TraceError("aten.mul: a complex Python number (write it as a tensor)")
    if isinstance(y, torch.fx.Node):
        r = c.cast(c.v(y), dtype)
        return c.broadcast_to(b.mul(z, c.reshape(r, r.shape + (1,))), shape)
    return b.mul(z, float(y))


@complex_lowers("aten.add", "aten.sub")
def _add(c, node, args, kwargs):
    """Sums and differences of complex tensors: part by part."""
    if not all(_is_complex(c, a) for a in args[:2]) or kwargs.get("alpha", 1) != 1 or \
            len(args) > 2:
        raise TraceError(f"{op_name(node.target)} on complex numbers: of two complex "
                         f"tensors only")
    shape, _ = c.out()
    b = B(c)
    x, y = c.v(args[0]), c.v(args[1])
    out = b.add(x, y) if op_name(node.target) == "aten.add" else b.sub(x, y)
    return c.broadcast_to(out, shape)


@complex_lowers("aten.div")
def _div(c, node, args, kwargs):
    if _is_complex(c, args[1]) or isinstance(args[1], torch.fx.Node) or \
            isinstance(args[1], complex) or kwargs:
        raise TraceError("aten.div on complex numbers: by a real number only")
    return B(c).div(c.v(args[0]), float(args[1]))


@complex_lowers("aten.view", "aten.reshape", "aten._unsafe_view", "aten.unsqueeze",
                "aten.squeeze", "aten.flatten", "aten.unflatten")
def _reshape(c, node, args, kwargs):
    return c.reshape(c.v(args[0]), c.out()[0])


@complex_lowers("aten.expand")
def _expand(c, node, args, kwargs):
    return c.broadcast_to(c.v(args[0]), c.out()[0])


@complex_lowers("aten.alias", "aten.clone", "aten.contiguous", "aten.lift_fresh_copy",
                "aten.detach", "aten._to_copy", "aten.to", "aten.resolve_conj",
                "aten.resolve_neg")
def _same(c, node, args, kwargs):
    """Copies: a complex tensor to complex; a complex to real type keeps
    the real part, as PyTorch's cast does."""
    x = c.v(args[0])
    shape, dtype = c.out()
    if _is_complex(c, node):
        return c.cast(x, dtype)
    return c.cast(_parts(c, x)[0], dtype)


@complex_lowers("aten.slice", "aten.select", "aten.transpose", "aten.cat", "aten.permute")
def _on_axes(c, node, args, kwargs):
    """Ops that name axes: the complex tensor's axes, counted from its
    own rank (a negative one is not the parts' axis), then the real op."""
    name = op_name(node.target)
    args, kwargs = list(args), dict(kwargs)
    if name == "aten.cat":
        rank = len(c.out()[0]) - 1
        axis = args[1] if len(args) > 1 else kwargs.pop("dim", 0)
        if not all(_is_complex(c, a) for a in args[0]):
            raise TraceError("aten.cat on complex numbers: of complex tensors only")
        args = [args[0], dim(axis, rank)]
    else:
        rank = c.v(args[0]).rank - 1
        if name == "aten.permute":
            args[1] = [dim(d, rank) for d in args[1]] + [rank]
        elif name == "aten.transpose":
            args[1], args[2] = dim(args[1], rank), dim(args[2], rank)
        else:
            axis = args[1] if len(args) > 1 else kwargs.pop("dim", 0)
            args = [args[0], dim(axis, rank)] + args[2:]
    return LOWERINGS[name](c, node, tuple(args), kwargs)


@complex_lowers("aten.gather")
def _gather(c, node, args, kwargs):
    """torch.gather of a complex tensor (torchtitan's RoPE picks each
    token's rotation by its position): both parts at the index, the index
    repeated over the parts axis."""
    from .shapes import take_along
    x, index = c.v(args[0]), c.v(args[2])
    d = dim(args[1], x.rank - 1)
    index = c.reshape(index, index.shape + (1,))
    index = c.emit("fsdp.broadcast", [index], [(index.shape[:-1] + (2,), index.dtype)])
    return take_along(c, x, index, d)
