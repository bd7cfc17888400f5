"""ATen ops of a traced graph, written as fsdp dialect ops.

One function per ATen op (or family), registered in LOWERINGS under the op's
name without its overload (`aten.add`) and without functionalization's
`_copy` suffix (`view_copy` is `view`). Each receives the lowering context,
the fx node and its arguments, and returns the result Value (or a list for
ops with several results, None for a result nothing may use).

Values that depend on no input and no parameter (a causal mask, position
indices, RoPE tables) are evaluated here, on the CPU, and written as
constants; a large one that is one value repeated is written as a splat,
and a large one built from a splat (tril/triu of ones) keeps the op that
builds it, so fsdp-opt still recognises a causal mask at T = 8192.
"""
import math
import operator
import os
import re

import torch

from .mlir import TraceError, bool_attr, canonical, f32_attr, i64_array, i64_attr, string, symbol

LOWERINGS = {}
# The lowerings of ops where a complex tensor goes in or comes out
# (decompose/complex.py): a complex tensor is lowered as a real one with a
# trailing axis of 2 (real, imaginary).
COMPLEX = {}

# Constants up to this many elements are written as dense literals; larger
# ones are a splat or the ops that build them (or, failing both, dense up to
# LARGEST_CONSTANT).
SMALL_CONSTANT = 1 << 16
LARGEST_CONSTANT = 1 << 24


def lowers(*names, table=None):
    """Registers a lowering under `names` in LOWERINGS (or `table`)."""
    table = LOWERINGS if table is None else table

    def register(fn):
        for n in names:
            table[n] = fn
        return fn
    return register


_NOT_VIEW_COPIES = {"aten._to_copy", "aten.lift_fresh_copy", "aten.index_copy"}


def op_name(target):
    """`aten.view_copy.default` -> `aten.view`."""
    if target is operator.getitem:
        return "getitem"
    if hasattr(target, "fsdp_name"):
        return target.fsdp_name
    name = str(target.overloadpacket) if hasattr(target, "overloadpacket") else str(target)
    name = name.replace("torch.ops.", "")
    # functionalize writes views as their *_copy twins; ops whose own name
    # ends so (index_copy is no view of index) keep it.
    if name.endswith("_copy") and name not in _NOT_VIEW_COPIES:
        name = name[:-len("_copy")]
    return name


_RANDOM = {}


def is_random(target):
    """Whether an ATen op draws random numbers, judged by what the op is:
    PyTorch tags it `nondeterministic_seeded`, or one of its overloads takes
    a `Generator` (bernoulli, normal, multinomial, rrelu_with_noise, ... are
    not all tagged in every PyTorch). Never by its name."""
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return False
    key = str(packet)
    if key not in _RANDOM:
        tag = getattr(torch, "Tag", None)
        seeded = tag is not None and getattr(tag, "nondeterministic_seeded", None)
        random = False
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if seeded and seeded in getattr(op, "tags", ()):
                random = True
            if any("Generator" in str(a.type) for a in op._schema.arguments):
                random = True
        _RANDOM[key] = random
    return _RANDOM[key]


class Context:
    """Lowers one captured graph into a Writer."""

    def __init__(self, gm, writer, placeholders, constant_nodes, symbols):
        self.gm = gm
        self.w = writer
        self.env = placeholders   # node -> Value (inputs), or callable (params)
        self.const = {}                 # node -> torch.Tensor or python value
        self.materialized = {}
        self.constant_nodes = constant_nodes  # nodes no input reaches
        self.symbols = symbols          # parameter placeholder -> its symbol
        self.node = None
        self.seed = 0                   # trace(seed=): keys the dropouts' streams
        self.dropouts = 0               # dropout ops written so far

    # -- values ------------------------------------------------------------
    def meta(self, node):
        """A node's shape and dtype as lowered: a complex tensor's with a
        trailing axis of 2 and its parts' real dtype."""
        if node.op == "get_attr":  # a tensor the module holds (not a buffer)
            t = getattr(self.gm, node.target)
            shape, dtype = tuple(t.shape), t.dtype
        else:
            m = node.meta.get("tensor_meta")
            if m is None or not hasattr(m, "shape"):
                raise TraceError(f"{op_name(node.target)}: no shape recorded for {node.name}")
            shape, dtype = tuple(m.shape), m.dtype
        if dtype.is_complex:
            return shape + (2,), canonical(_REAL_PARTS.get(dtype, dtype))
        return shape, canonical(dtype)

    def lowering(self, node):
        """The function that lowers `node`: its op's, or where a complex
        tensor goes in or comes out, its op's on complex numbers."""
        name = op_name(node.target)
        if any(is_complex(self.gm, n) for n in [node] + node.all_input_nodes):
            if name not in COMPLEX:
                raise TraceError(f"{name} on complex numbers: what rotary embeddings do with "
                                 f"them traces ({', '.join(sorted(COMPLEX))})")
            return COMPLEX[name]
        return LOWERINGS[name]

    def out(self):
        return self.meta(self.node)

    def is_const(self, a):
        return not isinstance(a, torch.fx.Node) or a in self.constant_nodes

    def const_value(self, a):
        """The value of a constant argument (evaluated on the CPU)."""
        if isinstance(a, (list, tuple)):
            return type(a)(self.const_value(x) for x in a)
        if not isinstance(a, torch.fx.Node):
            return a
        if a not in self.const:
            if a.op == "get_attr":
                self.const[a] = getattr(self.gm, a.target).detach().to("cpu")
            else:
                args = [self.const_value(x) for x in a.args]
                kwargs = {k: self.const_value(v) for k, v in a.kwargs.items()}
                if "device" in kwargs:
                    kwargs["device"] = torch.device("cpu")
                self.const[a] = a.target(*args, **kwargs)
        return self.const[a]

    def v(self, a):
        """The Value of a tensor argument."""
        if isinstance(a, torch.fx.Node):
            if a in self.constant_nodes:
                return self.materialize(a)
            value = self.env.get(a)
            if callable(value):          # a parameter: read where first used
                value = self.env[a] = value()
            if value is None:
                raise TraceError(f"{a.name}: a result the fsdp lowering does not produce "
                                 f"(used by {self.node.name if self.node else '?'})")
            return value
        raise TraceError(f"expected a tensor, got {a!r}")

    def materialize(self, node):
        if node in self.materialized:
            return self.materialized[node]
        shape, dtype = self.meta(node)
        n = math.prod(shape)
        name = op_name(node.target) if node.op == "call_function" else node.op
        loc = node.meta.get("module_path")
        if n <= SMALL_CONSTANT or node.op == "get_attr":
            if n > LARGEST_CONSTANT:
                raise TraceError(f"constant {node.name}: {n} elements")
            value = self.w.constant(_real(self.const_value(node)).to(dtype), loc)
        elif name in SPLATS:
            value = self.w.splat(SPLATS[name](node), shape, dtype, loc)
        elif name in LOWERINGS:
            saved, self.node = self.node, node
            try:
                value = self.lowering(node)(self, node, node.args, node.kwargs)
            finally:
                self.node = saved
        elif n <= LARGEST_CONSTANT:
            value = self.w.constant(_real(self.const_value(node)).to(dtype), loc)
        else:
            raise TraceError(f"constant {node.name} ({name}): {n} elements, too many "
                             f"to write and not built by an op fsdp has")
        self.materialized[node] = value
        return value

    # -- writing -----------------------------------------------------------
    def emit(self, name, operands, results=None, props=None):
        results = results if results is not None else [self.out()]
        outs = self.w.op(name, operands, results, props,
                         self.node.meta.get("module_path") if self.node else None)
        return outs[0] if len(outs) == 1 else outs

    def cast(self, v, dtype):
        dtype = canonical(dtype)
        if v.dtype == dtype:
            return v
        return self.emit("fsdp.cast", [v], [(v.shape, dtype)])

    def scalar(self, x, dtype):
        return self.w.splat(x, (), dtype)

    def operand(self, a, dtype):
        """A tensor or Python scalar argument as a Value of `dtype`."""
        if isinstance(a, torch.fx.Node):
            return self.cast(self.v(a), dtype)
        if isinstance(a, bool) and dtype != torch.bool:
            a = int(a)
        return self.scalar(a, dtype)

    def reshape(self, v, shape):
        shape = tuple(int(d) for d in shape)
        if v.shape == shape:
            return v
        return self.emit("fsdp.reshape", [v], [(shape, v.dtype)])

    def broadcast_to(self, v, shape):
        """v broadcast to `shape` by torch's rules (leading axes added);
        a shape that does not broadcast is a TraceError naming the node."""
        shape = tuple(int(d) for d in shape)
        if v.shape == shape:
            return v
        if tuple(torch.broadcast_shapes(torch.Size(v.shape), torch.Size(shape))) != shape:
            raise TraceError(f"{self.node.target}: an operand of shape {list(v.shape)} does "
                             f"not broadcast to {list(shape)}")
        v = self.reshape(v, (1,) * (len(shape) - v.rank) + tuple(v.shape))
        return self.emit("fsdp.broadcast", [v], [(shape, v.dtype)])

    def transpose(self, v, perm):
        perm = [int(p) for p in perm]
        if perm == list(range(v.rank)):
            return v
        shape = tuple(v.shape[p] for p in perm)
        return self.emit("fsdp.transpose", [v], [(shape, v.dtype)],
                         {"perm": i64_array(perm)})


_REAL_PARTS = {torch.complex64: torch.float32, torch.complex128: torch.float64,
               torch.complex32: torch.float16}


def is_complex(gm, node):
    """Whether `node`'s result is a complex tensor."""
    if node.op == "get_attr":
        t = getattr(gm, node.target, None)
        return isinstance(t, torch.Tensor) and t.is_complex()
    dtype = getattr(node.meta.get("tensor_meta"), "dtype", None)
    return dtype is not None and dtype.is_complex


def _real(value):
    """A constant's value as written: a complex one as its real and
    imaginary parts on a trailing axis."""
    t = torch.as_tensor(value)
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def dim(d, rank):
    d = int(d)
    if not -max(rank, 1) <= d < max(rank, 1):
        raise TraceError(f"dimension {d} out of range for rank {rank}")
    return d % max(rank, 1)


def fill_value(node):
    name = op_name(node.target)
    if name in ("aten.ones", "aten.new_ones", "aten.ones_like"):
        return 1
    if name in ("aten.zeros", "aten.new_zeros", "aten.zeros_like"):
        return 0
    if name in ("aten.full", "aten.full_like"):
        return node.args[1]
    if name == "aten.new_full":
        return node.args[2]
    return node.args[0]  # scalar_tensor


SPLATS = {n: fill_value for n in (
    "aten.ones", "aten.new_ones", "aten.ones_like", "aten.zeros", "aten.new_zeros",
    "aten.zeros_like", "aten.full", "aten.full_like", "aten.new_full",
    "aten.scalar_tensor")}


# -- identities, shapes, layouts ---------------------------------------------
@lowers("aten.clone", "aten.alias", "aten.contiguous", "aten.lift_fresh_copy",
        "aten.lift_fresh", "aten.lift")
def _identity(c, node, args, kwargs):
    return c.v(args[0])


@lowers("aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.reshape",
        "aten.unsqueeze", "aten.squeeze", "aten.flatten", "aten.unflatten")
def _reshape(c, node, args, kwargs):
    return c.reshape(c.v(args[0]), c.out()[0])


@lowers("aten.expand")
def _expand(c, node, args, kwargs):
    x = c.v(args[0])
    shape = c.out()[0]
    if x.shape == shape:
        return x
    return c.emit("fsdp.broadcast", [x], [(shape, x.dtype)])


@lowers("aten.copy")
def _copy(c, node, args, kwargs):
    """The functional copy_ (torch.export writes an in-place copy into a
    fresh tensor so): `src` cast to the destination's dtype and broadcast to
    its shape; the destination's values are not read."""
    shape, dtype = c.out()
    return c.broadcast_to(c.cast(c.v(args[1]), dtype), shape)


@lowers("aten.permute")
def _permute(c, node, args, kwargs):
    x = c.v(args[0])
    return c.transpose(x, [dim(d, x.rank) for d in args[1]])


@lowers("aten.transpose")
def _transpose(c, node, args, kwargs):
    x = c.v(args[0])
    if x.rank == 0:  # transpose(0-dim, 0, 0) or (-1, -1): torch's identity
        return x
    a, b = dim(args[1], x.rank), dim(args[2], x.rank)
    perm = list(range(x.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return c.transpose(x, perm)


@lowers("aten.t")
def _t(c, node, args, kwargs):
    x = c.v(args[0])
    return c.transpose(x, [1, 0]) if x.rank == 2 else x


@lowers("aten.slice")
def _slice(c, node, args, kwargs):
    x = c.v(args[0])
    d = dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), x.rank)
    size = x.shape[d]
    start = args[2] if len(args) > 2 else kwargs.get("start")
    end = args[3] if len(args) > 3 else kwargs.get("end")
    step = args[4] if len(args) > 4 else kwargs.get("step", 1)
    start, end, step = slice(start, end, step).indices(size)
    if step <= 0:
        raise TraceError("aten.slice: a non-positive step")
    end = max(end, start)
    if (start, end, step) == (0, size, 1):
        return x
    starts = [0] * x.rank
    limits = list(x.shape)
    strides = [1] * x.rank
    starts[d], limits[d], strides[d] = start, end, step
    return c.emit("fsdp.slice", [x], None,
                  {"starts": i64_array(starts), "limits": i64_array(limits),
                   "strides": i64_array(strides)})


@lowers("aten.select")
def _select(c, node, args, kwargs):
    x = c.v(args[0])
    d = dim(args[1], x.rank)
    i = int(args[2]) % x.shape[d]
    starts, limits = [0] * x.rank, list(x.shape)
    starts[d], limits[d] = i, i + 1
    shape = list(x.shape)
    shape[d] = 1
    y = c.emit("fsdp.slice", [x], [(tuple(shape), x.dtype)],
               {"starts": i64_array(starts), "limits": i64_array(limits),
                "strides": i64_array([1] * x.rank)})
    return c.reshape(y, c.out()[0])


@lowers("aten.split", "aten.split_with_sizes", "aten.unbind", "aten.unsafe_split",
        "aten.unsafe_split_with_sizes")
def _split(c, node, args, kwargs):
    # unsafe_split is split without the aliasing checks (RNN cells use it);
    # the plan's outputs are fresh values either way.
    x = c.v(args[0])
    name = op_name(node.target).replace("unsafe_", "")
    if name == "aten.unbind":
        d = dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), x.rank)
        sizes = [1] * x.shape[d]
    else:
        d = dim(args[2] if len(args) > 2 else kwargs.get("dim", 0), x.rank)
        if name == "aten.split_with_sizes":
            sizes = [int(s) for s in args[1]]
        else:
            step = int(args[1])
            sizes = [min(step, x.shape[d] - o) for o in range(0, x.shape[d], step)]
    shapes = []
    for s in sizes:
        shape = list(x.shape)
        shape[d] = s
        shapes.append((tuple(shape), x.dtype))
    outs = c.emit("fsdp.split", [x], shapes,
                  {"axis": i64_attr(d), "sizes": i64_array(sizes)})
    outs = outs if isinstance(outs, list) else [outs]
    if name == "aten.unbind":
        outs = [c.reshape(o, o.shape[:d] + o.shape[d + 1:]) for o in outs]
    return outs


@lowers("aten.cat")
def _cat(c, node, args, kwargs):
    shape, dtype = c.out()
    parts = [c.cast(c.v(a), dtype) for a in args[0]]
    parts = [p for p in parts if p.numel > 0 or p.rank != 1]
    d = dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), len(shape))
    if not parts or math.prod(shape) == 0:  # nothing to join: an empty result
        return c.w.splat(0, shape, dtype)
    if len(parts) == 1:
        return parts[0]
    return c.emit("fsdp.concat", parts, None, {"axis": i64_attr(d)})


@lowers("getitem")
def _getitem(c, node, args, kwargs):
    value = c.env.get(args[0])
    if value is None and args[0] in c.constant_nodes:
        raise TraceError(f"{node.name}: an element of a constant tuple")
    return value[args[1]]


@lowers("aten._to_copy", "aten.to", "aten.type_as")
def _to(c, node, args, kwargs):
    return c.cast(c.v(args[0]), c.out()[1])


# -- elementwise ---------------------------------------------------------------
def _unary_rows():
    """aten op -> fsdp op of common/UnaryOps.def's rows (the registry
    of elementwise unary ops the C++ side is generated from)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "common", "UnaryOps.def")
    rows = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'FSDP_UNARY\(\w+, "(\w+)", "\w*", "([\w.]*)",', line)
            if m and m.group(2):
                rows[m.group(2)] = "fsdp." + m.group(1)
    if not rows:
        raise ImportError(f"{path}: no FSDP_UNARY rows")
    return rows


UNARY_ROWS = _unary_rows()
UNARY = dict(UNARY_ROWS, **{"aten.logical_not": "fsdp.not", "aten.bitwise_not": "fsdp.not"})


@lowers(*UNARY)
def _unary(c, node, args, kwargs):
    shape, dtype = c.out()
    # The fsdp op is the ATen op at its defaults (softplus's beta=1,
    # threshold=20): any other argument is refused, never dropped.
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        for i, arg in enumerate(schema.arguments[1:], start=1):
            given = args[i] if i < len(args) else kwargs.get(arg.name, arg.default_value)
            if arg.name != "out" and given != arg.default_value:
                raise TraceError(f"{arg.name}={given!r}: only {arg.name}="
                                 f"{arg.default_value!r} maps to {UNARY[op_name(node.target)]}")
    x = c.cast(c.v(args[0]), dtype)
    name = op_name(node.target)
    if name in ("aten.sign", "aten.bitwise_not") and not dtype.is_floating_point \
            and dtype != torch.bool:
        # fsdp.sign takes floats and fsdp.not booleans. On integers, exactly:
        # (x > 0) - (x < 0), and ~x = -1 - x (two's complement).
        from .decompose.builder import B
        b = B(c)
        if name == "aten.bitwise_not":
            return b.sub(b.s(-1, dtype), x)
        return b.where(b.gt(x, 0), 1, b.where(b.lt(x, 0), -1, 0))
    return c.emit(UNARY[name], [x], [(shape, dtype)])


@lowers("aten.gelu")
def _gelu(c, node, args, kwargs):
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return c.emit("fsdp.gelu", [c.v(args[0])], None, {"approximate": string(approximate)})


ARITH = {"aten.add": "fsdp.add", "aten.sub": "fsdp.sub", "aten.mul": "fsdp.mul",
         "aten.div": "fsdp.div", "aten.pow": "fsdp.pow", "aten.maximum": "fsdp.max",
         "aten.minimum": "fsdp.min", "aten.rsub": "fsdp.sub",
         "aten.clamp_min": "fsdp.max", "aten.clamp_max": "fsdp.min"}


@lowers(*ARITH)
def _arith(c, node, args, kwargs):
    name = op_name(node.target)
    shape, dtype = c.out()
    a, b = args[0], args[1]
    if name == "aten.rsub":
        a, b = b, a
    rounding = kwargs.get("rounding_mode") if name == "aten.div" else None
    if rounding is not None and not dtype.is_floating_point:
        from .decompose.elementwise import integer_division
        return integer_division(c, c.operand(a, dtype), c.operand(b, dtype), rounding)[0]
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 and name != "aten.div" else 1)
    lhs, rhs = c.operand(a, dtype), c.operand(b, dtype)
    if alpha != 1:
        rhs = c.emit("fsdp.mul", [rhs, c.scalar(alpha, dtype)], [(rhs.shape, dtype)])
    y = c.emit(ARITH[name], [lhs, rhs], [(shape, dtype)])
    if rounding is not None:  # "trunc" or "floor": the quotient rounded
        y = c.emit("fsdp." + rounding, [y], [(shape, dtype)])
    return y


# op -> (fsdp comparison, negated): ne = not equal, le = not greater, ...
COMPARE = {"aten.eq": ("fsdp.equal", False), "aten.ne": ("fsdp.equal", True),
           "aten.lt": ("fsdp.less", False), "aten.gt": ("fsdp.greater", False),
           "aten.le": ("fsdp.greater", True), "aten.ge": ("fsdp.less", True)}


@lowers(*COMPARE)
def _compare(c, node, args, kwargs):
    op, negate = COMPARE[op_name(node.target)]
    shape, _ = c.out()
    a, b = args[0], args[1]
    ta = c.v(a)
    other = c.v(b).dtype if isinstance(b, torch.fx.Node) else None
    common = torch.promote_types(ta.dtype, other) if other is not None else ta.dtype
    if other is None and isinstance(b, float) and not common.is_floating_point:
        common = torch.float32
    y = c.emit(op, [c.operand(a, common), c.operand(b, common)], [(shape, torch.bool)])
    return c.emit("fsdp.not", [y], [(shape, torch.bool)]) if negate else y


@lowers("aten.isnan")
def _isnan(c, node, args, kwargs):
    """x != x: NaN alone is not equal to itself (an integer never is NaN)."""
    shape, _ = c.out()
    x = c.v(args[0])
    if not x.dtype.is_floating_point:
        return c.w.splat(False, shape, torch.bool)
    return c.emit("fsdp.not", [c.emit("fsdp.equal", [x, x], [(shape, torch.bool)])],
                  [(shape, torch.bool)])


@lowers("aten.logical_and", "aten.logical_or", "aten.bitwise_and", "aten.bitwise_or")
def _logical(c, node, args, kwargs):
    if c.out()[1] != torch.bool:  # integer x & (2^k - 1): decompose/elementwise.py
        raise TraceError(f"{op_name(node.target)} on integers")
    op = "fsdp.and" if "and" in op_name(node.target) else "fsdp.or"
    return c.emit(op, [c.operand(args[0], torch.bool), c.operand(args[1], torch.bool)])


@lowers("aten.where")
def _where(c, node, args, kwargs):
    shape, dtype = c.out()
    return c.emit("fsdp.where", [c.operand(args[0], torch.bool), c.operand(args[1], dtype),
                                 c.operand(args[2], dtype)])


@lowers("aten.masked_fill")
def _masked_fill(c, node, args, kwargs):
    shape, dtype = c.out()
    return c.emit("fsdp.where", [c.operand(args[1], torch.bool), c.operand(args[2], dtype),
                                 c.v(args[0])])


@lowers("aten.tril", "aten.triu")
def _trilu(c, node, args, kwargs):
    k = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
    return c.emit("fsdp.trilu", [c.v(args[0])], None,
                  {"k": i64_attr(k), "upper": bool_attr(op_name(node.target) == "aten.triu")})


# -- products --------------------------------------------------------------------
def _scaled(c, v, factor):
    if factor == 1:
        return v
    return c.emit("fsdp.mul", [v, c.scalar(factor, v.dtype)], [(v.shape, v.dtype)])


@lowers("aten.mm", "aten.bmm", "aten.matmul")
def _mm(c, node, args, kwargs):
    """fsdp.matmul broadcasts batch dimensions as torch.matmul does; a 1-D
    operand (torch.export keeps aten.matmul whole) is a row on the left or
    a column on the right, that dimension dropped from the result."""
    a, b = c.v(args[0]), c.v(args[1])
    if not a.dtype.is_floating_point:
        return _integer_matmul(c, a, b)
    if a.rank >= 2 and b.rank >= 2:
        return c.emit("fsdp.matmul", [a, b])
    shape, dtype = c.out()
    if a.rank == 1 and b.rank == 1:
        y = c.emit("fsdp.matmul", [c.reshape(a, (1, a.numel)), c.reshape(b, (b.numel, 1))],
                   [((1, 1), dtype)])
        return c.reshape(y, ())
    if a.rank == 1:  # [K] @ [..., K, N] -> [..., N]
        a2 = c.reshape(a, (1, a.numel))
        full = tuple(b.shape[:-2]) + (1, b.shape[-1])
    else:            # [..., M, K] @ [K] -> [..., M]
        b = c.reshape(b, (b.numel, 1))
        a2 = a
        full = tuple(a.shape[:-1]) + (1,)
    return c.reshape(c.emit("fsdp.matmul", [a2, b], [(full, dtype)]), tuple(shape))


INTEGER_MATMUL_LIMIT = 1 << 24


def _integer_matmul(c, a, b):
    """A product of integer matrices (fsdp.matmul takes floats), exactly:
    [.., M, K, 1] times [.., 1, K, N], summed over K in int64 (wrapping as
    PyTorch's). M·K·N elements, bounded."""
    from .decompose.builder import B
    shape, dtype = c.out()
    a2 = c.reshape(a, (1,) + a.shape) if a.rank == 1 else a
    b2 = c.reshape(b, b.shape + (1,)) if b.rank == 1 else b
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    if m * k * n > INTEGER_MATMUL_LIMIT:
        raise TraceError(f"an integer matmul of [{m}, {k}] by [{k}, {n}] (composed as "
                         f"{m * k * n} products, at most {INTEGER_MATMUL_LIMIT})")
    b_ = B(c)
    prod = b_.mul(c.reshape(c.cast(a2, torch.int64), a2.shape + (1,)),
                  c.reshape(c.cast(b2, torch.int64), b2.shape[:-2] + (1,) + b2.shape[-2:]))
    y = b_.reduce("reduce_sum", prod, [prod.rank - 2], False)
    return c.reshape(c.cast(y, dtype), tuple(shape))


@lowers("aten.addmm", "aten.baddbmm")
def _addmm(c, node, args, kwargs):
    shape, dtype = c.out()
    bias, a, b = c.v(args[0]), c.v(args[1]), c.v(args[2])
    beta = kwargs.get("beta", 1)
    alpha = kwargs.get("alpha", 1)
    if (beta == 1 and alpha == 1 and bias.rank == 1 and bias.shape[0] == shape[-1]
            and bias.dtype == dtype):
        return c.emit("fsdp.matmul", [a, b, bias])  # nn.Linear's bias epilogue
    y = _scaled(c, c.emit("fsdp.matmul", [a, b]), alpha)
    return c.emit("fsdp.add", [y, _scaled(c, bias, beta)])


@lowers("aten.convolution")
def _convolution(c, node, args, kwargs):
    x, w = c.v(args[0]), c.v(args[1])
    bias = args[2]
    stride, padding, dilation, transposed, _, groups = args[3:9]
    from .decompose import conv, conv_transpose
    if transposed:
        return conv_transpose(c, node, args)
    spatial = x.rank - 2
    expand = (lambda v: [int(v[0])] * spatial if len(v) == 1 else [int(i) for i in v])
    return conv(c, x, w, c.v(bias) if bias is not None else None, expand(stride),
                expand(padding), expand(dilation), int(groups))


# -- reductions, normalisations, losses -------------------------------------------
def _axes(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    axes = sorted({dim(d, rank) for d in dims})
    # A 0-dim tensor has no axis: PyTorch takes dim 0 or -1 there as the
    # tensor itself, which reduces nothing.
    return axes if rank > 0 else []


@lowers("aten.sum", "aten.mean", "aten.amax")
def _reduce(c, node, args, kwargs):
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    name = op_name(node.target)
    all_dims = len(args) < 2 or args[1] is None or isinstance(args[1], torch.dtype)
    axes = _axes(None if all_dims else args[1], x.rank)
    keep = kwargs.get("keepdim", args[2] if len(args) > 2 and not all_dims else False)
    op = {"aten.sum": "fsdp.reduce_sum", "aten.mean": "fsdp.reduce_mean",
          "aten.amax": "fsdp.reduce_max"}[name]
    props = {"axes": i64_array(axes), "keepdims": bool_attr(bool(keep))}
    if not dtype.is_floating_point:
        # Integers (a count of a mask's elements, the largest position)
        # reduce in int64, exactly; a boolean amax as 0/1 int64.
        y = c.emit(op, [c.cast(x, torch.int64)], [(shape, torch.int64)], props)
        return c.cast(y, dtype)
    return c.emit(op, [x], [(shape, dtype)], props)


@lowers("aten._softmax", "aten._log_softmax", "aten.softmax", "aten.log_softmax")
def _softmax(c, node, args, kwargs):
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    op = "fsdp.log_softmax" if "log" in op_name(node.target) else "fsdp.softmax"
    if x.rank == 0:
        # PyTorch takes dim 0 or -1 of a 0-dim tensor as the tensor itself:
        # the softmax of one value, over a [1] view.
        y = c.emit(op, [c.reshape(x, (1,))], [((1,), dtype)], {"axis": i64_attr(0)})
        return c.reshape(y, ())
    return c.emit(op, [x], [(shape, dtype)], {"axis": i64_attr(dim(args[1], x.rank))})


@lowers("aten.native_layer_norm")
def _layer_norm(c, node, args, kwargs):
    x = c.v(args[0])
    normalized, weight, bias, eps = args[1], args[2], args[3], args[4]
    axis = x.rank - len(normalized)
    scale = c.v(weight) if weight is not None else c.w.splat(1.0, x.shape[axis:], x.dtype)
    operands = [x, scale] + ([c.v(bias)] if bias is not None else [])
    y = c.emit("fsdp.layer_norm", operands, [(x.shape, x.dtype)],
               {"axis": i64_attr(axis), "epsilon": f32_attr(eps)})
    users = {u.args[1] for u in node.users if op_name(u.target) == "getitem"}
    if not users & {1, 2}:
        return [y, None, None]
    axes = list(range(axis, x.rank))
    mean, rstd = _saved_stats(c, x, axes, eps)
    return [y, mean, rstd]


def _saved_stats(c, x, axes, eps):
    """The statistics a normalisation saves for its backward, when the step
    reads them: the mean over `axes` and 1/sqrt(variance + eps), the
    variance the biased one (the mean of the squared deviations), the axes
    kept as size 1. PyTorch's autograd gives them no gradient (outputs of the
    fused op it does not differentiate), so they are behind
    fsdp.stop_gradient: a plain composition would pass a gradient through
    them. Under sync-batch-norm they are still this rank's (the kernel's
    all-reduced statistics are not these)."""
    keep = tuple(1 if i in axes else d for i, d in enumerate(x.shape))

    def mean_of(v):
        return c.emit("fsdp.reduce_mean", [v], [(keep, x.dtype)],
                      {"axes": i64_array(axes), "keepdims": bool_attr(True)})

    def emit(op, operands, shape):
        return c.emit("fsdp." + op, operands, [(shape, x.dtype)])

    mean = mean_of(x)
    dev = emit("sub", [x, mean], x.shape)
    var = mean_of(emit("mul", [dev, dev], x.shape))
    rstd = emit("rsqrt", [emit("add", [var, c.scalar(eps, x.dtype)], keep)], keep)
    return [emit("stop_gradient", [v], keep) for v in (mean, rstd)]


@lowers("aten.embedding")
def _embedding(c, node, args, kwargs):
    w, ids = c.v(args[0]), c.v(args[1])
    padding_idx = args[2] if len(args) > 2 else kwargs.get("padding_idx", -1)
    y = c.emit("fsdp.gather", [w, ids], None, {"axis": i64_attr(0)})
    if padding_idx is not None and padding_idx >= 0:
        # PyTorch never trains the padding row (no gradient reaches it from
        # a padding lookup), but a lookup returns whatever the row holds:
        # nn.Embedding initialises it to zeros, a model's own init or a
        # checkpoint may not (ModernBERT's truncated-normal init). The
        # padding lookups' values behind fsdp.stop_gradient.
        pad = c.emit("fsdp.equal", [ids, c.scalar(padding_idx, ids.dtype)],
                     [(ids.shape, torch.bool)])
        pad = c.reshape(pad, ids.shape + (1,))
        held = c.emit("fsdp.stop_gradient", [y], [(y.shape, y.dtype)])
        y = c.emit("fsdp.where", [pad, held, y], [(y.shape, y.dtype)])
    return y


REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def cross_entropy(logits, target, weight, reduction, ignore_index):
    """What patterns.py makes of nll_loss(log_softmax(logits, 1)): one op."""
    raise NotImplementedError  # a marker in the graph, never called


cross_entropy.fsdp_name = "fsdp.cross_entropy"


@lowers("aten.nll_loss_forward", "aten.nll_loss2d_forward", "fsdp.cross_entropy")
def _nll_loss(c, node, args, kwargs):
    x, target, weight, reduction, ignore = args[:5]
    shape, dtype = c.meta(next(iter(node.users))) if node.users else ((), x.dtype)
    xv, tv = c.v(x), c.v(target)
    if xv.rank == 1:  # unbatched: one sample of C classes, a batch of one
        xv, tv = c.reshape(xv, (1,) + xv.shape), c.reshape(tv, (1,))
    operands = [xv, tv] + ([c.v(weight)] if weight is not None else [])
    props = {"reduction": string(REDUCTIONS[int(reduction)])}
    if ignore is not None and ignore >= -(1 << 62):
        props["ignore_index"] = i64_attr(ignore)
    op = "fsdp.cross_entropy" if op_name(node.target) == "fsdp.cross_entropy" else "fsdp.nll_loss"
    unbatched = c.v(x).rank == 1 and REDUCTIONS[int(reduction)] == "none"
    loss = c.emit(op, operands, [((1,) if unbatched else shape, dtype)], props)
    return [c.reshape(loss, shape) if unbatched else loss, None]


@lowers("aten.mse_loss")
def _mse(c, node, args, kwargs):
    shape, dtype = c.out()
    x, t = c.v(args[0]), c.operand(args[1], c.v(args[0]).dtype)
    reduction = REDUCTIONS[int(args[2] if len(args) > 2 else kwargs.get("reduction", 1))]
    d = c.emit("fsdp.sub", [x, t], [(x.shape, x.dtype)])
    sq = c.emit("fsdp.mul", [d, d], [(x.shape, x.dtype)])
    if reduction == "none":
        return sq
    op = "fsdp.reduce_mean" if reduction == "mean" else "fsdp.reduce_sum"
    return c.emit(op, [sq], [(shape, dtype)],
                  {"axes": i64_array(range(x.rank)), "keepdims": bool_attr(False)})


@lowers("aten.native_dropout", "aten.dropout")
def _dropout(c, node, args, kwargs):
    """fsdp.dropout in training with p > 0 (its mask drawn in the plan from
    a seed of its own, the step and each element's index); the identity
    with p = 0 or in eval mode."""
    x = c.v(args[0])
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    train = args[2] if len(args) > 2 else kwargs.get("train", True)
    if p and train:
        x = dropout(c, x, p)
    return [x, None] if op_name(node.target) == "aten.native_dropout" else x


def dropout(c, x, p):
    """fsdp.dropout of `x` at rate `p`, its stream keyed by the trace's
    seed and the number of dropouts written before it (each its own)."""
    c.dropouts += 1
    seed = (c.seed * 0x9E3779B1 + c.dropouts) % (1 << 62)
    return c.emit("fsdp.dropout", [x], [(x.shape, x.dtype)],
                  {"p": f"{float(p):.17g} : f64", "seed": i64_attr(seed)})


# -- vision --------------------------------------------------------------------------
def _pool_pads(padding, spatial):
    pads = [int(padding[0])] * spatial if len(padding) == 1 else [int(p) for p in padding]
    return pads + pads


@lowers("aten.max_pool2d_with_indices", "aten.max_pool1d_with_indices")
def _max_pool(c, node, args, kwargs):
    x = c.v(args[0])
    spatial = 1 if "1d" in op_name(node.target) else 2
    shape, dtype = c.meta(next(u for u in node.users if u.args[1] == 0))
    if x.rank == spatial + 1:  # unbatched (C, L) or (C, H, W): a batch of one
        x = c.reshape(x, (1,) + x.shape)
        shape = (1,) + tuple(shape)
    kernel = list(args[1]) * (spatial if len(args[1]) == 1 else 1)
    stride = list(args[2]) if len(args) > 2 and args[2] else kernel
    stride = stride * (spatial if len(stride) == 1 else 1)
    padding = args[3] if len(args) > 3 else [0]
    dilation = list(args[4]) if len(args) > 4 else [1]
    dilation = dilation * (spatial if len(dilation) == 1 else 1)
    ceil = args[5] if len(args) > 5 else False
    y = c.emit("fsdp.pool", [x], [(tuple(shape), dtype)],
               {"mode": string("max"), "kernel": i64_array(kernel), "strides": i64_array(stride),
                "pads": i64_array(_pool_pads(padding, spatial)),
                "dilations": i64_array(dilation), "ceil_mode": bool_attr(ceil)})
    if x.rank != c.v(args[0]).rank:
        y = c.reshape(y, tuple(shape[1:]))
    return [y, None]


@lowers("aten.avg_pool2d")
def _avg_pool(c, node, args, kwargs):
    x = c.v(args[0])
    kernel = list(args[1]) * (2 if len(args[1]) == 1 else 1)
    stride = list(args[2]) if len(args) > 2 and args[2] else kernel
    stride = stride * (2 if len(stride) == 1 else 1)
    padding = args[3] if len(args) > 3 else [0]
    ceil = args[4] if len(args) > 4 else False
    include = args[5] if len(args) > 5 else True
    divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
    if divisor is not None:
        include = False
    y = c.emit("fsdp.pool", [x], None,
               {"mode": string("avg"), "kernel": i64_array(kernel), "strides": i64_array(stride),
                "pads": i64_array(_pool_pads(padding, 2)), "dilations": i64_array([1, 1]),
                "ceil_mode": bool_attr(ceil), "count_include_pad": bool_attr(include)})
    if divisor is not None:
        # The window's sum over a fixed divisor: the mean of its real
        # elements times their count (a constant of the output's shape).
        pads = _pool_pads(padding, 2)
        counts = []
        for axis in range(2):
            n, k, st, p = x.shape[2 + axis], kernel[axis], stride[axis], pads[axis]
            counts.append(torch.tensor([max(min(i * st - p + k, n) - max(i * st - p, 0), 0)
                                        for i in range(y.shape[2 + axis])], dtype=torch.float64))
        scale = (counts[0][:, None] * counts[1][None, :] / divisor).to(y.dtype)
        y = c.emit("fsdp.mul", [y, c.w.constant(scale)], [(y.shape, y.dtype)])
    return y


@lowers("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d")
def _adaptive_avg_pool(c, node, args, kwargs):
    x = c.v(args[0])
    out = [int(s) for s in args[1]]
    h, w = x.shape[2:]
    if h % out[0] or w % out[1]:
        raise TraceError(f"adaptive average pooling of {h}x{w} to {out[0]}x{out[1]} "
                         f"(only whole windows)")
    kernel = [h // out[0], w // out[1]]
    return c.emit("fsdp.pool", [x], None,
                  {"mode": string("avg"), "kernel": i64_array(kernel), "strides": i64_array(kernel),
                   "pads": i64_array([0, 0, 0, 0]), "dilations": i64_array([1, 1])})


@lowers("aten.native_batch_norm", "aten._native_batch_norm_legit_functional")
def _batch_norm(c, node, args, kwargs):
    """Training: fsdp.batch_norm with the batch's statistics, and the running
    statistics updated as PyTorch does (`running = (1 - momentum)·running +
    momentum·batch`, the unbiased variance) and stored back into their
    buffers. Eval: the running statistics normalise, as elementwise ops."""
    x = c.v(args[0])
    channels = x.shape[1]
    weight, bias, rmean, rvar, training, momentum, eps = args[1:8]
    scale = c.v(weight) if weight is not None else c.w.splat(1.0, (channels,), x.dtype)
    shift = c.v(bias) if bias is not None else c.w.splat(0.0, (channels,), x.dtype)
    stats = ((channels,), x.dtype)
    if not training:
        if rmean is None or rvar is None:
            raise TraceError("batch norm in eval mode without running statistics")
        per = (channels,) + (1,) * (x.rank - 2)
        binary = (lambda op, a, b: c.emit(op, [a, b], [(_bshape(a, b), x.dtype)]))
        rstd = c.emit("fsdp.sqrt", [binary("fsdp.add", c.v(rvar), c.scalar(eps, x.dtype))],
                      [stats])
        y = binary("fsdp.sub", x, c.reshape(c.v(rmean), per))
        y = binary("fsdp.div", y, c.reshape(rstd, per))
        y = binary("fsdp.mul", y, c.reshape(scale, per))
        y = binary("fsdp.add", y, c.reshape(shift, per))
        return [y, None, None]
    y, mean, var = c.emit("fsdp.batch_norm", [x, scale, shift], [(x.shape, x.dtype), stats, stats],
                          {"epsilon": f32_attr(eps)})
    saved = [None, None]
    if {u.args[1] for u in node.users if op_name(u.target) == "getitem"} & {1, 2}:
        axes = [0] + list(range(2, x.rank))
        saved = [c.reshape(v, (channels,)) for v in _saved_stats(c, x, axes, eps)]
    for running, batch in ((rmean, mean), (rvar, var)):
        if running is None:
            continue
        if running not in c.symbols:
            raise TraceError("batch norm running statistics that are not module buffers")
        kept = c.emit("fsdp.mul", [c.v(running), c.scalar(1 - momentum, x.dtype)], [stats])
        added = c.emit("fsdp.mul", [batch, c.scalar(momentum, x.dtype)], [stats])
        new = c.emit("fsdp.add", [kept, added], [stats])
        c.w.op("fsdp.assign_buffer", [new], [], {"param": symbol(c.symbols[running])})
    return [y] + saved


@lowers("aten._native_batch_norm_legit", "aten._native_batch_norm_legit_no_training")
def _batch_norm_legit(c, node, args, kwargs):
    """PyTorch 2.x's forms of native_batch_norm (torch.export keeps them
    whole once lowered here: decomposed, their saved statistics would carry
    a gradient PyTorch does not give them), their arguments laid out as
    native_batch_norm's: `no_stats` has no running statistics,
    `_no_training` is eval."""
    if op_name(node.target).endswith("_no_training"):
        x, weight, bias, rmean, rvar, momentum, eps = args[:7]
        training = False
    elif node.target._overloadname == "no_stats":
        x, weight, bias, training, momentum, eps = args[:6]
        rmean = rvar = None
    else:
        x, weight, bias, rmean, rvar, training, momentum, eps = args[:8]
    return _batch_norm(c, node, [x, weight, bias, rmean, rvar, training, momentum, eps], {})


def _bshape(a, b):
    return tuple(torch.broadcast_shapes(torch.Size(a.shape), torch.Size(b.shape)))
