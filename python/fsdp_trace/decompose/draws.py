"""Random draws made in the plan: rand, randn, uniform_, normal_,
exponential_, bernoulli, randint and rrelu, each written over fsdp.uniform (24
random bits a draw from Philox, keyed by a seed of the draw's own, the step
and each element's index in the global batch; common/Philox.h). A value
drawn once while tracing would be the same at every step; these are drawn
anew at every step, and again alike where activation checkpointing
recomputes them.

The distributions, from U uniform in [0, 1):
- uniform(a, b): a + (b - a)·U;
- normal(μ, σ): μ + σ·√(-2 ln(1 - U₁))·cos(2π U₂) (Box-Muller; two draws.
  1 - U₁ lies in (0, 1], so the logarithm is finite: |z| < 5.8);
- exponential(λ): -ln(1 - U)/λ;
- bernoulli(p): U < p (p a number or a tensor of probabilities);
- randint(lo, hi): lo + ⌊(hi - lo)·U⌋, clamped below hi (ranges up to 2^24);
- rrelu's slopes: lower + (upper - lower)·U where x ≤ 0.

As in PyTorch, nothing flows back through a draw: torch.normal(mean, std)
gives mean and std no gradient, and neither does bernoulli its
probabilities. The draws cannot equal PyTorch's own (no two generators
agree); tests/e2e/random_ops.py judges them by their distributions.
"""
import math

import torch

from ..lower import lowers, op_name
from ..mlir import TraceError, i64_attr
from .builder import B, arg

# The random ATen ops lowered here, which trace() does not refuse.
LOWERED = set()


def _random(*names):
    LOWERED.update(names)
    return lowers(*names)


def uniform(c, shape):
    """fsdp.uniform of `shape` (f32 in [0, 1)), its stream keyed by the
    trace's seed and the number of draws written before it (the counter
    dropout's seeds come from too: no two share a stream)."""
    c.dropouts += 1
    seed = (c.seed * 0x9E3779B1 + c.dropouts) % (1 << 62)
    return c.emit("fsdp.uniform", [], [(tuple(shape), torch.float32)],
                  {"seed": i64_attr(seed)})


def standard_normal(c, shape):
    b = B(c)
    radius = b.un("sqrt", b.mul(b.un("log1p", b.neg(uniform(c, shape))), -2.0))
    return b.mul(radius, b.un("cos", b.mul(uniform(c, shape), 2 * math.pi)))


def _float_result(c):
    shape, dtype = c.out()
    if not dtype.is_floating_point:
        raise TraceError(f"a draw of floats into {dtype}")
    return shape, dtype


def _number(c, a, what):
    if isinstance(a, torch.fx.Node):
        raise TraceError(f"{what} given as a tensor")
    return float(a)


@_random("aten.rand", "aten.rand_like")
def _rand(c, node, args, kwargs):
    shape, dtype = _float_result(c)
    return c.cast(uniform(c, shape), dtype)


def _in_place_draw(c, args, kwargs, op, names, defaults, draw):
    """uniform_(x, from, to) and normal_(x, mean, std) made functional
    (x's values are not read): a + b·draw, or a + (b - a)·draw."""
    shape, dtype = _float_result(c)
    a, b_ = (_number(c, arg(args, kwargs, i + 1, n, d), f"{op}'s {n}")
             for i, (n, d) in enumerate(zip(names, defaults)))
    b = B(c)
    scale = b_ - a if op == "uniform_" else b_
    return c.cast(b.add(b.mul(draw(c, shape), scale), a), dtype)


@_random("aten.uniform")
def _uniform(c, node, args, kwargs):
    return _in_place_draw(c, args, kwargs, "uniform_", ("from", "to"), (0.0, 1.0), uniform)


@_random("aten.randn", "aten.randn_like")
def _randn(c, node, args, kwargs):
    shape, dtype = _float_result(c)
    return c.cast(standard_normal(c, shape), dtype)


@_random("aten.normal_functional")
def _normal_functional(c, node, args, kwargs):
    return _in_place_draw(c, args, kwargs, "normal_", ("mean", "std"), (0.0, 1.0),
                          standard_normal)


@_random("aten.normal")
def _normal(c, node, args, kwargs):
    """torch.normal: mean and std each a tensor or a number (float_float
    with a size). No gradient reaches a tensor mean or std, as in
    PyTorch."""
    shape, dtype = _float_result(c)
    b = B(c)

    def operand(a, default):
        a = default if a is None else a
        if isinstance(a, torch.fx.Node):
            v = c.cast(c.v(a), torch.float32)
            return c.emit("fsdp.stop_gradient", [v], [(v.shape, v.dtype)])
        return float(a)
    mean = operand(arg(args, kwargs, 0, "mean"), 0.0)
    std = operand(arg(args, kwargs, 1, "std"), 1.0)
    z = b.add(b.mul(standard_normal(c, shape), std), mean)
    return c.cast(c.broadcast_to(z, shape), dtype)


@_random("aten.exponential")
def _exponential(c, node, args, kwargs):
    """exponential_(x, lambd) made functional: -ln(1 - U)/λ."""
    shape, dtype = _float_result(c)
    rate = _number(c, arg(args, kwargs, 1, "lambd", 1.0), "exponential_'s lambd")
    if not rate > 0:
        raise TraceError(f"exponential_ expects lambd > 0, got {rate}")
    b = B(c)
    return c.cast(b.mul(b.un("log1p", b.neg(uniform(c, shape))), -1.0 / rate), dtype)


@_random("aten.bernoulli", "aten.bernoulli_")
def _bernoulli(c, node, args, kwargs):
    """bernoulli(probabilities), bernoulli(x, p) and the in-place
    bernoulli_(x, p) on a fresh tensor (PyTorch 1.13 writes torch.bernoulli(x,
    p) so): 1 where U < p. x's values are not read."""
    shape, dtype = c.out()
    in_place = op_name(node.target) == "aten.bernoulli_"
    if in_place:
        later = [u for u in args[0].users if u is not node]
        if later:
            raise TraceError(f"bernoulli_ on {args[0].name}, which {later[0].name} reads "
                             f"as well: only a fresh tensor's is traced")
    p = arg(args, kwargs, 1, "p", None)
    if p is None and not in_place:
        p = args[0]  # bernoulli(probabilities)
    if p is None:
        p = 0.5
    b = B(c)
    if isinstance(p, torch.fx.Node):
        p = c.broadcast_to(c.cast(c.v(p), torch.float32), shape)
    else:
        p = float(p)
    return c.cast(b.lt(uniform(c, shape), p), dtype)


@_random("aten.randint", "aten.randint_like")
def _randint(c, node, args, kwargs):
    """randint(high, size), randint(low, high, size), randint_like(x, high)
    and randint_like(x, low, high): lo + ⌊(hi - lo)·U⌋, in the node's
    dtype."""
    shape, dtype = c.out()
    numbers = args[1:] if op_name(node.target) == "aten.randint_like" else args
    numbers = [a for a in numbers if not isinstance(a, (list, tuple))]
    if any(isinstance(a, torch.fx.Node) for a in numbers):
        raise TraceError("randint with a tensor bound")
    if len(numbers) >= 2:
        lo, hi = int(numbers[0]), int(numbers[1])
    else:
        lo, hi = 0, int(numbers[0])
    if hi <= lo:
        raise TraceError(f"randint expects low < high, got [{lo}, {hi})")
    if hi - lo > 1 << 24:
        raise TraceError(f"randint over {hi - lo} values: draws hold 24 bits (2^24 values)")
    b = B(c)
    k = b.bin("min", b.un("floor", b.mul(uniform(c, shape), float(hi - lo))),
              float(hi - lo - 1))
    if dtype.is_floating_point:
        return c.cast(b.add(k, float(lo)), dtype)
    return b.add(c.cast(k, dtype), lo)


@_random("aten.rrelu_with_noise", "aten.rrelu_with_noise_functional")
def _rrelu(c, node, args, kwargs):
    """F.rrelu: x where x > 0, else x·a with a drawn uniform in [lower,
    upper) per element in training, (lower + upper)/2 in eval; the noise
    tensor PyTorch writes (the slope, 1 where x > 0) is the second result
    of the functional form. The gradient is the slope, as PyTorch's."""
    x = c.v(args[0])
    lower = _number(c, arg(args, kwargs, 2, "lower", 1.0 / 8), "rrelu's lower")
    upper = _number(c, arg(args, kwargs, 3, "upper", 1.0 / 3), "rrelu's upper")
    training = arg(args, kwargs, 4, "training", False)
    b = B(c)
    if training:
        slope = c.cast(b.add(b.mul(uniform(c, x.shape), upper - lower), lower), x.dtype)
    else:
        slope = c.w.splat((lower + upper) / 2, x.shape, x.dtype)
    positive = b.gt(x, 0.0)
    out = b.where(positive, x, b.mul(x, slope))
    if op_name(node.target) == "aten.rrelu_with_noise":
        return out
    return [out, b.where(positive, 1.0, slope)]


@_random("aten.multinomial")
def _multinomial(c, node, args, kwargs):
    """multinomial(weights [n] or [m, n], k, replacement): k category
    indices per row, each drawn with probability weight / row's sum. With
    replacement each is an inverse-CDF lookup: the number of running sums
    at or below U·total, kept at the last category of nonzero weight.
    Without, an exponential race: the k smallest -ln(1 - U)/w (Gumbel
    top-k; a zero weight never wins while a nonzero one is left, and where
    k exceeds the nonzero weights, which PyTorch refuses, zero weights
    fill the rest). The weights get no gradient, as in PyTorch."""
    from .shapes import cumulative_sum
    from .sorting import argsort
    shape, dtype = c.out()
    w = c.cast(c.v(args[0]), torch.float32)
    if w.rank not in (1, 2):
        raise TraceError(f"multinomial expects weights of rank 1 or 2, got {w.rank}")
    k = int(arg(args, kwargs, 1, "num_samples"))
    replacement = bool(arg(args, kwargs, 2, "replacement", False))
    w = c.emit("fsdp.stop_gradient", [w], [(w.shape, w.dtype)])
    if w.rank == 1:
        w = c.reshape(w, (1, w.shape[0]))
    m, n = w.shape
    if not replacement and k > n:
        raise TraceError(f"multinomial without replacement draws {k} of {n} categories")
    b = B(c)
    if replacement:
        cdf = cumulative_sum(c, w, 1)                                   # [m, n]
        total = b.slice(cdf, 1, n - 1, n)                               # [m, 1]
        t = c.reshape(b.mul(uniform(c, (m, k)), total), (m, k, 1))
        above = b.gt(c.reshape(cdf, (m, 1, n)), t)                      # [m, k, n]
        count = b.sub(float(n), b.reduce("reduce_sum", c.cast(above, torch.float32),
                                         [2], False))                   # sums <= U·total
        position = c.w.constant(torch.arange(n, dtype=torch.float32).reshape(1, n))
        last = b.reduce("reduce_max", b.where(b.gt(w, 0.0), position, 0.0), [1], True)
        index = c.cast(b.bin("min", count, last), torch.int64)          # [m, k]
    else:
        race = b.mul(b.un("log1p", b.neg(uniform(c, (m, n)))), -1.0)
        key = b.where(b.gt(w, 0.0), b.div(race, b.where(b.gt(w, 0.0), w, 1.0)),
                      float("inf"))
        index = b.slice(argsort(c, key, 1, False), 1, 0, k)
    return c.cast(c.reshape(index, shape), dtype)


@_random("aten.randperm")
def _randperm(c, node, args, kwargs):
    """randperm(n): the positions that sort n draws, sorted by a second
    draw first and then stably by the first (48 random bits a position, so
    ties, which would favour the earlier position, are 2^24 times rarer
    than with one draw)."""
    from .shapes import take_along
    from .sorting import argsort
    shape, dtype = c.out()
    n = shape[0]
    perm = argsort(c, uniform(c, (n,)), 0, False)
    first = take_along(c, uniform(c, (n,)), perm, 0)
    perm = take_along(c, perm, argsort(c, first, 0, False), 0)
    return c.cast(perm, dtype)
