"""Activations and elementwise math as compositions of fsdp ops."""
import math

import torch

from ..lower import LOWERINGS, TraceError, dim, lowers, op_name
from .builder import B, arg, float_in
from .reductions import p_norm

# -- activations -----------------------------------------------------------------


@lowers("aten.clamp", "aten.clip", "aten.hardtanh")
def _clamp(c, node, args, kwargs):
    b = B(c)
    shape, dtype = c.out()
    x = c.cast(c.v(args[0]), dtype)
    hardtanh = "hardtanh" in str(node.target)
    lo = arg(args, kwargs, 1, "min_val" if hardtanh else "min", -1.0 if hardtanh else None)
    hi = arg(args, kwargs, 2, "max_val" if hardtanh else "max", 1.0 if hardtanh else None)
    if lo is not None:
        x = b.bin("max", x, c.operand(lo, dtype))
    if hi is not None:
        x = b.bin("min", x, c.operand(hi, dtype))
    return c.reshape(x, shape) if x.shape != shape else x


@lowers("aten.leaky_relu")
def _leaky_relu(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    slope = arg(args, kwargs, 1, "negative_slope", 0.01)
    return b.where(b.gt(x, 0.0), x, b.mul(x, slope))


@lowers("aten.elu")
def _elu(c, node, args, kwargs):
    """scale·x above 0, scale·alpha·(exp(input_scale·x) - 1) below (selu and
    celu are elu with other constants)."""
    b = B(c)
    x = float_in(c, args[0])
    alpha = arg(args, kwargs, 1, "alpha", 1.0)
    scale = arg(args, kwargs, 2, "scale", 1.0)
    input_scale = arg(args, kwargs, 3, "input_scale", 1.0)
    neg = b.mul(b.un("expm1", b.mul(x, input_scale)), alpha * scale)
    return b.where(b.gt(x, 0.0), b.mul(x, scale), neg)


@lowers("aten.celu")
def _celu(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    alpha = arg(args, kwargs, 1, "alpha", 1.0)
    return b.where(b.gt(x, 0.0), x, b.mul(b.un("expm1", b.mul(x, 1.0 / alpha)), alpha))


@lowers("aten.selu")
def _selu(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    neg = b.mul(b.un("expm1", x), alpha * scale)
    return b.where(b.gt(x, 0.0), b.mul(x, scale), neg)


@lowers("aten.threshold")
def _threshold(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    return b.where(b.gt(x, float(args[1])), x, float(args[2]))


@lowers("aten.softshrink", "aten.hardshrink")
def _shrink(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    lam = float(arg(args, kwargs, 1, "lambd", 0.5))
    soft = "softshrink" in str(node.target)
    above = b.sub(x, lam) if soft else x
    below = b.add(x, lam) if soft else x
    return b.where(b.gt(x, lam), above, b.where(b.lt(x, -lam), below, 0.0))


@lowers("aten.log_sigmoid_forward", "aten.log_sigmoid")
def _log_sigmoid(c, node, args, kwargs):
    """-softplus(-x): min(x, 0) - log1p(exp(-|x|)), as PyTorch computes it."""
    b = B(c)
    x = c.v(args[0])
    y = b.sub(b.bin("min", x, 0.0), b.un("log1p", b.un("exp", b.un("neg", b.un("abs", x)))))
    return [y, None] if "forward" in str(node.target) else y


@lowers("aten.glu")
def _glu(c, node, args, kwargs):
    b = B(c)
    x = c.v(args[0])
    d = dim(arg(args, kwargs, 1, "dim", -1), x.rank)
    half = x.shape[d] // 2
    return b.mul(b.slice(x, d, 0, half), b.un("sigmoid", b.slice(x, d, half, 2 * half)))


@lowers("aten.prelu", "aten._prelu_kernel")
def _prelu(c, node, args, kwargs):
    b = B(c)
    x, w = c.v(args[0]), c.v(args[1])
    if w.numel > 1 and x.rank >= 2:
        w = c.reshape(w, (w.numel,) + (1,) * (x.rank - 2))
    elif w.numel == 1:
        w = c.reshape(w, ())
    return b.where(b.gt(x, 0.0), x, b.mul(w, x))


@lowers("aten.logit")
def _logit(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    eps = arg(args, kwargs, 1, "eps")
    if eps is not None:
        x = b.bin("min", b.bin("max", x, float(eps)), 1.0 - float(eps))
    return b.un("log", b.div(x, b.sub(b.s(1.0, x.dtype), x)))


# -- elementwise math --------------------------------------------------------------


@lowers("aten.sinh", "aten.cosh", "aten.tan", "aten.log2", "aten.log10", "aten.exp2",
        "aten.sinc", "aten.deg2rad", "aten.rad2deg", "aten.sgn", "aten.frac", "aten.erfc",
        "aten.square")
def _math(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    name = node.target.overloadpacket.__name__
    if name == "sinh":   # (expm1(x) - expm1(-x)) / 2: exact near 0
        return b.mul(b.sub(b.un("expm1", x), b.un("expm1", b.un("neg", x))), 0.5)
    if name == "cosh":
        return b.mul(b.add(b.un("exp", x), b.un("exp", b.un("neg", x))), 0.5)
    if name == "tan":
        return b.div(b.un("sin", x), b.un("cos", x))
    if name == "log2":
        # log(x) / ln 2 is an ulp or two off at powers of two (log2(2^13)
        # gave 13.000001, whose ceil is 14): where 2^round(y) is x, the
        # integer, the difference added behind a gradient stop.
        # (0 and inf: the difference is NaN, and left out.)
        y = b.mul(b.un("log", x), 1.0 / math.log(2.0))
        r = b.un("round", y)
        d = b.sub(r, y)
        exact = b.bin("and", b.eq(b.bin("pow", 2.0, r), x),
                      b.bin("less", b.un("abs", d), 0.5))
        fix = b.where(exact, d, 0.0)
        return b.add(y, c.emit("fsdp.stop_gradient", [fix], [(fix.shape, fix.dtype)]))
    if name == "log10":
        return b.mul(b.un("log", x), 1.0 / math.log(10.0))
    if name == "exp2":  # pow, as PyTorch's: exp(x ln 2) was 2e-6 off at x = 64
        return b.bin("pow", 2.0, x)
    if name == "sinc":
        px = b.mul(x, math.pi)
        safe = b.where(b.eq(x, 0.0), 1.0, px)
        return b.where(b.eq(x, 0.0), 1.0, b.div(b.un("sin", safe), safe))
    if name == "deg2rad":
        return b.mul(x, math.pi / 180.0)
    if name == "rad2deg":
        return b.mul(x, 180.0 / math.pi)
    if name == "sgn":
        return b.un("sign", x)
    if name == "frac":
        return b.sub(x, b.un("trunc", x))
    if name == "erfc":
        return b.sub(b.s(1.0, x.dtype), b.un("erf", x))
    if name == "square":
        return b.mul(x, x)
    raise TraceError(f"aten.{name}: no composition")


@lowers("aten.asinh", "aten.acosh", "aten.atanh")
def _inverse_hyperbolic(c, node, args, kwargs):
    """asinh: sign(x)·log(|x| + sqrt(x² + 1)) (no cancellation for x < 0);
    acosh: log(x + sqrt(x² - 1)); atanh: log1p(2x / (1 - x)) / 2."""
    b = B(c)
    x = float_in(c, args[0])
    name = node.target.overloadpacket.__name__
    if name == "asinh":
        a = b.un("abs", x)
        y = b.un("log1p", b.add(a, b.div(b.mul(a, a),
                                          b.add(b.un("sqrt", b.add(b.mul(a, a), 1.0)), 1.0))))
        return b.where(b.lt(x, 0.0), b.un("neg", y), y)
    if name == "acosh":
        return b.un("log", b.add(x, b.un("sqrt", b.sub(b.mul(x, x), 1.0))))
    return b.mul(b.un("log1p", b.div(b.mul(x, 2.0), b.sub(b.s(1.0, x.dtype), x))), 0.5)


@lowers("aten.atan2")
def _atan2(c, node, args, kwargs):
    """atan(y/x), moved by ±pi for x < 0 (by the sign of y), ±pi/2 at x = 0."""
    b = B(c)
    dtype = c.out()[1]
    y, x = c.operand(args[0], dtype), c.operand(args[1], dtype)
    base = b.un("atan", b.div(y, b.where(b.eq(x, 0.0), 1.0, x)))
    shift = b.where(b.lt(y, 0.0), -math.pi, math.pi)
    at_zero = b.where(b.lt(y, 0.0), -math.pi / 2, b.where(b.gt(y, 0.0), math.pi / 2, 0.0))
    return b.where(b.eq(x, 0.0), at_zero, b.where(b.lt(x, 0.0), b.add(base, shift), base))


@lowers("aten.nan_to_num")
def _nan_to_num(c, node, args, kwargs):
    b = B(c)
    x = float_in(c, args[0])
    info = torch.finfo(x.dtype)
    nan = arg(args, kwargs, 1, "nan") or 0.0
    posinf = arg(args, kwargs, 2, "posinf")
    neginf = arg(args, kwargs, 3, "neginf")
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    y = b.where(b.isnan(x), float(nan), x)
    y = b.where(b.eq(x, math.inf), float(posinf), y)
    return b.where(b.eq(x, -math.inf), float(neginf), y)


@lowers("aten.xlogy")
def _xlogy(c, node, args, kwargs):
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    return b.where(b.eq(x, 0.0), b.where(b.isnan(y), y, 0.0), b.mul(x, b.un("log", y)))


def _log_add_exp(c, args, ln_base):
    """log_b(b^x + b^y) = max + log1p(b^-|x - y|) / ln b, b = e or 2."""
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    m = b.bin("max", x, y)
    d = b.un("abs", b.sub(x, y))
    d = b.un("neg", d) if ln_base == 1.0 else b.mul(d, -ln_base)
    tail = b.un("log1p", b.un("exp", d))
    return b.add(m, tail if ln_base == 1.0 else b.mul(tail, 1.0 / ln_base))


@lowers("aten.logaddexp")
def _logaddexp(c, node, args, kwargs):
    return _log_add_exp(c, args, 1.0)


@lowers("aten.logaddexp2")
def _logaddexp2(c, node, args, kwargs):
    return _log_add_exp(c, args, math.log(2.0))


@lowers("aten.hypot")
def _hypot(c, node, args, kwargs):
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    return b.un("sqrt", b.add(b.mul(x, x), b.mul(y, y)))


@lowers("aten.copysign")
def _copysign(c, node, args, kwargs):
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    mag = b.un("abs", x)
    return b.where(b.lt(y, 0.0), b.un("neg", mag), mag)


@lowers("aten.fmod", "aten.remainder", "aten.floor_divide")
def _modulo(c, node, args, kwargs):
    """fmod: a - trunc(a/b)·b; remainder: a - floor(a/b)·b (the sign of b)."""
    b = B(c)
    shape, dtype = c.out()
    name = node.target.overloadpacket.__name__
    if not dtype.is_floating_point:
        q, r = integer_division(c, c.operand(args[0], dtype), c.operand(args[1], dtype),
                                "trunc" if name == "fmod" else "floor")
        return q if name == "floor_divide" else r
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    q = b.un("trunc" if name == "fmod" else "floor", b.div(x, y))
    return q if name == "floor_divide" else b.sub(x, b.mul(q, y))


def integer_division(c, x, y, rounding):
    """The quotient and remainder of integers (positions modulo a length,
    a floor division, a hash modulo a table size), `rounding` "trunc"
    (fmod's) or "floor" (remainder's, floor_divide's), exactly: fsdp.div
    on two i64 tensors truncates toward zero in int64, the remainder is
    x - q·y, and for floor a nonzero remainder of the sign opposite to y's
    moves q down by one and r by y. A division by zero is an error on the
    CPU backend, as in PyTorch's CPU kernel."""
    b = B(c)
    q = b.div(x, y)
    r = b.sub(x, b.mul(q, y))
    if rounding == "floor":
        wrong_sign = b.bin("and", b.un("not", b.eq(r, 0)),
                           b.un("not", b.eq(b.lt(r, 0), b.lt(y, 0))))
        q = b.where(wrong_sign, b.sub(q, b.s(1, x.dtype)), q)
        r = b.where(wrong_sign, b.add(r, y), r)
    return q, r


@lowers("aten.lerp")
def _lerp(c, node, args, kwargs):
    b = B(c)
    dtype = c.out()[1]
    s, e = c.operand(args[0], dtype), c.operand(args[1], dtype)
    w = c.operand(args[2], dtype)
    return b.add(s, b.mul(w, b.sub(e, s)))


@lowers("aten.addcmul", "aten.addcdiv")
def _addc(c, node, args, kwargs):
    b = B(c)
    dtype = c.out()[1]
    x, t1, t2 = (c.operand(a, dtype) for a in args[:3])
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    op = "mul" if "addcmul" in str(node.target) else "div"
    term = b.bin(op, t1, t2)
    if value != 1:
        term = b.mul(term, float(value))
    return b.add(x, term)


@lowers("aten.fmax", "aten.fmin")
def _fmax(c, node, args, kwargs):
    """max/min that ignore a NaN operand."""
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    op = "max" if "fmax" in str(node.target) else "min"
    m = b.bin(op, x, y)
    return b.where(b.isnan(x), y, b.where(b.isnan(y), x, m))


@lowers("aten.softplus")
def _softplus(c, node, args, kwargs):
    """fsdp.softplus at torch's defaults (beta 1, threshold 20); otherwise
    log1p(exp(beta·x)) / beta, and x itself where beta·x > threshold."""
    b = B(c)
    x = float_in(c, args[0])
    beta = float(arg(args, kwargs, 1, "beta", 1.0))
    threshold = float(arg(args, kwargs, 2, "threshold", 20.0))
    if beta == 1 and threshold == 20:
        return b.un("softplus", x)
    bx = b.mul(x, beta)
    soft = b.div(b.un("log1p", b.un("exp", b.where(b.gt(bx, threshold), 0.0, bx))), beta)
    return b.where(b.gt(bx, threshold), x, soft)



@lowers("aten.addr")
def _addr(c, node, args, kwargs):
    """beta·input + alpha·(v1 ⊗ v2)."""
    b = B(c)
    shape, dtype = c.out()
    x, v1, v2 = (c.cast(c.v(a), dtype) for a in args[:3])
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    outer = b.mul(c.reshape(v1, (v1.numel, 1)), c.reshape(v2, (1, v2.numel)))
    outer = outer if alpha == 1 else b.mul(outer, float(alpha))
    if beta == 0:  # input ignored, NaN included (PyTorch's rule)
        return outer
    return b.add(x if beta == 1 else b.mul(x, float(beta)), outer)


@lowers("aten.dist")
def _dist(c, node, args, kwargs):
    """‖x − y‖_p over every element: p = 2, 1, inf, -inf, 0 or any other."""
    b = B(c)
    dtype = c.out()[1]
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    p = float(arg(args, kwargs, 2, "p", 2))
    d = b.sub(x, y)
    return p_norm(c, d, p, list(range(d.rank)), False)


@lowers("aten._cdist_forward")
def _cdist(c, node, args, kwargs):
    """The p-distance of every row of x1 [.., P, M] to every row of x2
    [.., R, M]: the p-norm over M of their difference broadcast to
    [.., P, R, M] (p_norm's zero gradient at zero distance is torch's
    cdist backward's). P·R·M elements: the pairs' differences are formed."""
    b = B(c)
    shape, dtype = c.out()
    x1, x2 = c.operand(args[0], dtype), c.operand(args[1], dtype)
    p = float(args[2])
    d = b.sub(c.reshape(x1, x1.shape[:-1] + (1, x1.shape[-1])),
              c.reshape(x2, x2.shape[:-2] + (1,) + x2.shape[-2:]))
    return c.reshape(p_norm(c, d, p, [d.rank - 1], False), shape)


@lowers("aten._pdist_forward")
def _pdist(c, node, args, kwargs):
    """The p-distance of each pair i < j of x's rows [N, M], in row-major
    order of the pairs: the rows gathered at the pairs' constant indices,
    differenced, and p_norm over M."""
    b = B(c)
    shape, dtype = c.out()
    x = c.operand(args[0], dtype)
    p = float(arg(args, kwargs, 1, "p", 2))
    i, j = torch.triu_indices(x.shape[0], x.shape[0], 1)
    if i.numel() == 0:
        return c.w.splat(0, shape, dtype)
    d = b.sub(b.gather(x, i, 0), b.gather(x, j, 0))
    return c.reshape(p_norm(c, d, p, [1], False), shape)


@lowers("aten.linalg_cross")
def _cross(c, node, args, kwargs):
    """The cross product of 3-vectors along dim (broadcast)."""
    b = B(c)
    shape, dtype = c.out()
    x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
    d = dim(arg(args, kwargs, 2, "dim", -1), len(shape))
    x = c.emit("fsdp.broadcast", [x], [(shape, dtype)]) if x.shape != shape else x
    y = c.emit("fsdp.broadcast", [y], [(shape, dtype)]) if y.shape != shape else y
    part = [[b.slice(v, d, i, i + 1) for i in range(3)] for v in (x, y)]
    (x0, x1, x2), (y0, y1, y2) = part
    return b.concat([b.sub(b.mul(x1, y2), b.mul(x2, y1)), b.sub(b.mul(x2, y0), b.mul(x0, y2)),
                     b.sub(b.mul(x0, y1), b.mul(x1, y0))], d)


@lowers("aten.renorm")
def _renorm(c, node, args, kwargs):
    """Each slice along dim whose p-norm exceeds maxnorm scaled to it
    (PyTorch's factor maxnorm / (norm + 1e-7)), the others kept."""
    b = B(c)
    x = float_in(c, args[0])
    p, d, maxnorm = float(args[1]), dim(args[2], x.rank), float(args[3])
    norm = p_norm(c, x, p, [i for i in range(x.rank) if i != d], True)
    factor = b.where(b.gt(norm, maxnorm), b.div(maxnorm, b.add(norm, 1e-7)), 1.0)
    return b.mul(x, factor)


_round_plain = LOWERINGS["aten.round"]


@lowers("aten.round")
def _round(c, node, args, kwargs):
    """round(x, decimals=d) as PyTorch's kernel: nearbyint(x·10^d) / 10^d,
    or for d < 0 nearbyint(x / 10^-d) · 10^-d, in x's type."""
    d = kwargs.get("decimals", args[1] if len(args) > 1 else None)
    x = c.v(args[0])
    if d is None or not x.dtype.is_floating_point:
        return _round_plain(c, node, args[:1], {})
    b = B(c)
    ten = float(torch.tensor(10.0 ** abs(int(d)), dtype=x.dtype))
    if d < 0:
        return b.mul(b.un("round", b.div(x, ten)), ten)
    return b.div(b.un("round", b.mul(x, ten)), ten)


_logical_plain = LOWERINGS["aten.bitwise_and"]


@lowers("aten.logical_and", "aten.logical_or", "aten.bitwise_and", "aten.bitwise_or")
def _logical(c, node, args, kwargs):
    """Integer x & (2^k - 1): x's low k bits, x mod 2^k with the modulus's
    sign (two's complement's), x - 2^k·floor(x / 2^k), exactly in int64
    (grid_sample's reflection takes `flips & 1`; a hash its low bits).
    Booleans are lower.py's and/or; other integer bit operations are
    refused."""
    shape, dtype = c.out()
    if dtype == torch.bool:
        return _logical_plain(c, node, args, kwargs)
    name = op_name(node.target)
    mask = next((a for a in args[1:2] if isinstance(a, int) and not isinstance(a, bool)), None)
    if mask is None and c.is_const(args[1]):
        value = torch.as_tensor(c.const_value(args[1]))
        if value.numel() == 1 and not value.dtype.is_floating_point:
            mask = int(value)
    if "and" not in name or mask is None or mask < 0 or mask & (mask + 1) or mask >= 1 << 62:
        raise TraceError(f"{name} on integers (x & (2^k - 1) with a constant mask traces)")
    x = c.cast(c.v(args[0]), torch.int64)
    _, low = integer_division(c, x, B(c).s(mask + 1, torch.int64), "floor")
    return c.cast(low, dtype)


@lowers("aten.__lshift__", "aten.__rshift__", "aten.bitwise_left_shift",
        "aten.bitwise_right_shift")
def _shift(c, node, args, kwargs):
    """Integer x << k and x >> k by a constant k in [0, 62]: x·2^k (wrapping
    past 2^63, as PyTorch's) and floor(x / 2^k) (an arithmetic shift),
    exactly in int64. A shift by a tensor of values is refused."""
    shape, dtype = c.out()
    name = op_name(node.target)
    k = args[1] if isinstance(args[1], int) and not isinstance(args[1], bool) else None
    if k is None and c.is_const(args[1]):
        value = torch.as_tensor(c.const_value(args[1]))
        if value.numel() == 1 and not value.dtype.is_floating_point:
            k = int(value)
    if dtype.is_floating_point or dtype == torch.bool or k is None or not 0 <= k <= 62:
        raise TraceError(f"{name}: a shift of integers by a constant in [0, 62] traces")
    b = B(c)
    x = c.cast(c.v(args[0]), torch.int64)
    if "left" in name or "lshift" in name:
        return c.cast(b.mul(x, b.s(1 << k, torch.int64)), dtype)
    return c.cast(integer_division(c, x, b.s(1 << k, torch.int64), "floor")[0], dtype)
