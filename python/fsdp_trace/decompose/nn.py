"""Products, losses and vision ops as compositions of fsdp ops: linear
resamplings are products with constant matrices; a transposed convolution
is the strided convolution it is the gradient of."""
import math

import torch

from ..lower import LOWERINGS, TraceError, dropout, lowers, op_name
from ..mlir import bool_attr, f32_attr, i64_array, i64_attr, string
from .builder import B, arg
from .shapes import _place, pad

# -- matrix products ---------------------------------------------------------------


@lowers("aten.dot", "aten.vdot", "aten.inner")
def _dot(c, node, args, kwargs):
    b = B(c)
    x, y = c.v(args[0]), c.v(args[1])
    if x.rank != 1 or y.rank != 1:
        raise TraceError(f"{node.target}: only vectors")
    return b.reduce("reduce_sum", b.mul(x, y), [0], False)


@lowers("aten.addmv", "aten.addbmm")
def _addmv(c, node, args, kwargs):
    """beta·b + alpha·(A v), and beta·b + alpha·Σ_i B1_i B2_i."""
    b = B(c)
    shape, dtype = c.out()
    bias, m1, m2 = c.v(args[0]), c.v(args[1]), c.v(args[2])
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    if "addmv" in str(node.target):
        prod = c.reshape(c.emit("fsdp.matmul", [m1, c.reshape(m2, (m2.numel, 1))],
                                [((m1.shape[0], 1), dtype)]), (m1.shape[0],))
    else:
        p = c.emit("fsdp.matmul", [m1, m2], [((m1.shape[0], m1.shape[1], m2.shape[2]), dtype)])
        prod = b.reduce("reduce_sum", p, [0], False)
    prod = prod if alpha == 1 else b.mul(prod, float(alpha))
    if beta == 0:
        return prod
    return b.add(bias if beta == 1 else b.mul(bias, float(beta)), prod)


@lowers("aten.mv")
def _mv(c, node, args, kwargs):
    a, v = c.v(args[0]), c.v(args[1])
    if not a.dtype.is_floating_point:
        from ..lower import _integer_matmul
        return _integer_matmul(c, a, v)
    y = c.emit("fsdp.matmul", [a, c.reshape(v, (v.numel, 1))], [((a.shape[0], 1), a.dtype)])
    return c.reshape(y, (a.shape[0],))


@lowers("aten._trilinear")
def _trilinear(c, node, args, kwargs):
    """The sum over `sumdim` of i1·i2·i3, each first unsqueezed at its
    `expand` dims (bilinear's x1ᵀ W x2 for every output feature). The
    product is formed whole: bilinear layers are small where they appear."""
    b = B(c)
    ins = [c.v(a) for a in args[:3]]
    total = ins[0].rank + len(args[3])
    factors = []
    for v, expand in zip(ins, args[3:6]):
        shape = list(v.shape)
        for d in sorted(int(d) % total for d in expand):
            shape.insert(d, 1)
        factors.append(c.reshape(v, tuple(shape)))
    y = b.mul(b.mul(factors[0], factors[1]), factors[2])
    sumdim = [int(d) % total for d in args[6]]
    if sumdim:
        y = b.reduce("reduce_sum", y, sumdim, True)
    return c.reshape(y, c.out()[0])


# -- losses ------------------------------------------------------------------------

REDUCE = {0: None, 1: "reduce_mean", 2: "reduce_sum"}


def _reduced(c, v, reduction):
    op = REDUCE[int(reduction)]
    return v if op is None else B(c).reduce(op, v, range(v.rank), False)


def _traced_shape(c, node, loss):
    """The loss in the shape the trace recorded for the node's (first)
    result: PyTorch's kernels make one row's unreduced loss a scalar, torch
    2.11's shape function for multilabel_margin_loss (1,)."""
    m = node.meta.get("tensor_meta")
    if m is None:  # make_fx records a tuple's parts on its getitems
        m = next((u.meta.get("tensor_meta") for u in node.users
                  if op_name(u.target) == "getitem" and u.args[1] == 0), None)
    m = m if hasattr(m, "shape") else m[0] if isinstance(m, (tuple, list)) else None
    return c.reshape(loss, tuple(m.shape)) if hasattr(m, "shape") else loss


def _as_rows(c, x):
    """A margin loss's input as rows of class scores, (N, C): a (C,) input
    one row, a scalar one row of one class."""
    return c.reshape(x, (1,) * (2 - x.rank) + x.shape) if x.rank < 2 else x


@lowers("aten.multi_margin_loss")
def _multi_margin(c, node, args, kwargs):
    """Each sample's Σ_{i≠y} max(0, margin − x_y + x_i)^p · w_y / C (the
    classes' hinge against the target's score; C the class count)."""
    b = B(c)
    x = _as_rows(c, c.v(args[0]))
    y = c.reshape(c.v(args[1]), x.shape[:1])
    p = int(arg(args, kwargs, 2, "p", 1))
    margin = float(arg(args, kwargs, 3, "margin", 1.0))
    weight = arg(args, kwargs, 4, "weight")
    reduction = arg(args, kwargs, 5, "reduction", 1)
    if p not in (1, 2):
        raise TraceError(f"multi_margin_loss with p={p} (PyTorch takes 1 or 2)")
    n, classes = x.shape
    target = c.reshape(y, (n, 1))
    hit = b.eq(target, c.w.constant(torch.arange(classes)))  # (n, C): i == y
    score = b.reduce("reduce_sum", b.where(hit, x, 0.0), [1], True)
    z = b.add(b.sub(x, score), margin)
    h = b.where(b.gt(z, 0.0), z, 0.0)
    if p == 2:
        h = b.mul(h, h)
    if weight is not None:
        h = b.mul(h, c.reshape(b.gather(c.v(weight), y, 0), (n, 1)))
    h = b.where(hit, 0.0, h)
    per = b.div(b.reduce("reduce_sum", h, [1], False), float(classes))
    return _traced_shape(c, node, _reduced(c, per, reduction))


@lowers("aten.multilabel_margin_loss_forward", "aten.multilabel_margin_loss")
def _multilabel_margin(c, node, args, kwargs):
    """Each sample's Σ_j Σ_{i not a target} max(0, 1 − (x_{y_j} − x_i)) / C,
    j over the target's classes up to its first -1. The is_target output
    (the backward's) is not written."""
    b = B(c)
    x = _as_rows(c, c.v(args[0]))
    reduction = arg(args, kwargs, 2, "reduction", 1)
    n, classes = x.shape
    y = c.reshape(c.v(args[1]), x.shape)
    # valid_j: no -1 at or before position j (a running count of them).
    stops = c.cast(b.eq(y, -1), x.dtype)
    seen = b.along(stops, 1, torch.ones(classes, classes).triu())
    valid = c.reshape(b.eq(seen, 0.0), (n, classes, 1))
    picks = b.bin("and", b.eq(c.reshape(y, (n, classes, 1)),
                              c.w.constant(torch.arange(classes))), valid)  # (n, j, i)
    picks = c.cast(picks, x.dtype)
    is_target = b.reduce("reduce_max", picks, [1], True)  # (n, 1, C)
    score = c.emit("fsdp.matmul", [picks, c.reshape(x, (n, classes, 1))],
                   [((n, classes, 1), x.dtype)])  # x_{y_j}, 0 past the targets
    z = b.add(b.sub(c.reshape(x, (n, 1, classes)), score), 1.0)
    h = b.where(b.gt(z, 0.0), z, 0.0)
    h = b.where(valid, h, 0.0)
    h = b.mul(h, b.sub(1.0, is_target))
    per = b.div(b.reduce("reduce_sum", h, [1, 2], False), float(classes))
    loss = _traced_shape(c, node, _reduced(c, per, reduction))
    return [loss, None] if "forward" in str(node.target) else loss


@lowers("aten.smooth_l1_loss", "aten.huber_loss")
def _smooth_l1(c, node, args, kwargs):
    b = B(c)
    x = c.v(args[0])
    t = c.operand(args[1], x.dtype)
    reduction = arg(args, kwargs, 2, "reduction", 1)
    huber = "huber" in str(node.target)
    k = float(arg(args, kwargs, 3, "delta" if huber else "beta", 1.0))
    d = b.un("abs", b.sub(x, t))
    if k == 0 and not huber:
        return _reduced(c, d, reduction)
    quad = b.mul(b.mul(d, d), 0.5 if huber else 0.5 / k)
    lin = b.mul(b.sub(d, 0.5 * k), k) if huber else b.sub(d, 0.5 * k)
    return _reduced(c, b.where(b.lt(d, k), quad, lin), reduction)


# -- vision ------------------------------------------------------------------------


def _interp_matrix(n_in, n_out, mode, align_corners, scale=None):
    """(n_in, n_out): column j holds the weights of output j."""
    m = torch.zeros(n_in, n_out, dtype=torch.float64)
    for j in range(n_out):
        if mode == "nearest":
            src = min(int(math.floor(j * (n_in / n_out if scale is None else 1.0 / scale))),
                      n_in - 1)
            m[src, j] = 1
            continue
        if align_corners:
            pos = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            r = n_in / n_out if scale is None else 1.0 / scale
            pos = max((j + 0.5) * r - 0.5, 0.0)
        lo = min(int(math.floor(pos)), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        w = pos - lo
        m[lo, j] += 1 - w
        m[hi, j] += w
    return m


@lowers("aten.upsample_nearest1d", "aten.upsample_nearest2d", "aten.upsample_nearest3d",
        "aten.upsample_linear1d", "aten.upsample_bilinear2d", "aten.upsample_trilinear3d")
def _upsample(c, node, args, kwargs):
    """Separable along each spatial axis: nearest is a gather, (bi/tri)linear
    a product with a constant interpolation matrix."""
    x = c.v(args[0])
    out_shape = c.out()[0]
    nearest = "nearest" in str(node.target)
    align = False if nearest else bool(args[2]) if len(args) > 2 and isinstance(args[2], bool) \
        else bool(kwargs.get("align_corners", False))
    scales = []
    for a in list(args[2 if nearest else 3:]) + [kwargs.get("scale_factors"),
                                                  kwargs.get("scales")]:
        scales += [float(v) for v in (a if isinstance(a, (list, tuple)) else [a])
                   if isinstance(v, float)]
    spatial = x.rank - 2
    scales = scales if len(scales) == spatial else None
    for i in range(spatial):
        d = 2 + i
        n_in, n_out = x.shape[d], out_shape[d]
        scale = scales[i] if scales else None
        if nearest:
            r = (1.0 / scale) if scale else n_in / n_out
            idx = torch.clamp((torch.arange(n_out, dtype=torch.float64) * r).floor().long(),
                              max=n_in - 1)
            x = B(c).gather(x, idx, d)
        else:
            x = B(c).along(x, d, _interp_matrix(n_in, n_out, "linear", align, scale).float())
    return x


def _adaptive_windows(n_in, n_out):
    """PyTorch's adaptive windows: output j pools [floor(j·n/m), ceil((j+1)·n/m))."""
    return [((j * n_in) // n_out, -((-(j + 1) * n_in) // n_out)) for j in range(n_out)]


def _adaptive_matrix(n_in, n_out):
    m = torch.zeros(n_in, n_out, dtype=torch.float64)
    for j, (start, end) in enumerate(_adaptive_windows(n_in, n_out)):
        m[start:end, j] = 1.0 / (end - start)
    return m


def _adaptive_avg_pool(c, node, args, kwargs):
    """Whole windows are a pool; uneven ones a product with a constant
    averaging matrix along each spatial axis (the windows are separable)."""
    x = c.v(args[0])
    out = [int(s) for s in args[1]]
    first = x.rank - len(out)  # unbatched inputs have no batch axis
    if len(out) == 2 and x.rank == 4 and all(x.shape[2 + i] % out[i] == 0 for i in range(2)):
        return _even_adaptive(c, node, args, kwargs)
    for i, n in enumerate(out):
        x = B(c).along(x, first + i, _adaptive_matrix(x.shape[first + i], n).float())
    return x


_even_adaptive = LOWERINGS["aten._adaptive_avg_pool2d"]
for _name in ("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d",
              "aten.adaptive_avg_pool1d", "aten._adaptive_avg_pool3d",
              "aten.adaptive_avg_pool3d"):
    LOWERINGS[_name] = _adaptive_avg_pool


def conv_transpose(c, node, args):
    """A transposed convolution as the convolution it is the gradient of:
    the input spread out by the stride (zeros between: a constant
    scatter), padded by dilation·(k - 1) - padding (+ output_padding after),
    convolved at stride 1 with the kernel flipped and its in/out channels
    swapped within each group."""
    x, w = c.v(args[0]), c.v(args[1])
    bias = args[2]
    stride, padding, dilation, _, output_padding, groups = args[3:9]
    spatial = x.rank - 2
    expand = (lambda v: [int(v[0])] * spatial if len(v) == 1 else [int(i) for i in v])
    stride, padding, dilation = expand(stride), expand(padding), expand(dilation)
    output_padding = expand(output_padding) if output_padding else [0] * spatial
    groups = int(groups)
    if any(s > 1 for s in stride):
        spread = list(x.shape[:2]) + [(n - 1) * s + 1 for n, s in zip(x.shape[2:], stride)]

        def place(t):
            out = torch.zeros(spread, dtype=t.dtype)
            out[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)] = t
            return out
        x = _place(c, x, tuple(spread), place)
    for i in range(spatial):
        k = w.shape[2 + i]
        q = dilation[i] * (k - 1) - padding[i]
        x = pad(c, x, 2 + i, q, q + output_padding[i])
    # (C_in, C_out/g, k...) -> (C_out, C_in/g, k...), each kernel flipped.
    cin, cout_g = w.shape[0], w.shape[1]
    k = w.shape[2:]
    wg = c.reshape(w, (groups, cin // groups, cout_g) + k)
    wg = c.transpose(wg, [0, 2, 1] + list(range(3, 3 + spatial)))
    wf = c.reshape(wg, (groups * cout_g, cin // groups) + k)
    for i in range(spatial):
        wf = B(c).gather(wf, torch.arange(k[i] - 1, -1, -1), 2 + i)
    return conv(c, x, wf, c.v(bias) if bias is not None else None, [1] * spatial,
                [0] * spatial, dilation, groups)


def conv(c, x, w, bias, stride, padding, dilation, groups):
    """A convolution (each axis padded by padding[i] on both sides): 1-D
    and 2-D are fsdp.conv. A 3-D one is a 2-D one over the depth folded
    into the batch: for each output depth, the kd input depth slices its
    kernel reaches stacked in the channels (within each group, tap by tap)
    and the kernel's depth taps stacked likewise, so one 2-D convolution
    over N·D_out maps computes it (the video models: r3d, r2plus1d, s3d)."""
    spatial = x.rank - 2
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
           zip(x.shape[2:], w.shape[2:], stride, padding, dilation)]
    if spatial <= 2:
        operands = [x, w] + ([bias] if bias is not None else [])
        return c.emit("fsdp.conv", operands, [((x.shape[0], w.shape[0]) + tuple(out), x.dtype)],
                      {"strides": i64_array(stride), "pads": i64_array(padding + padding),
                       "dilations": i64_array(dilation), "groups": i64_attr(groups)})
    if spatial != 3:
        raise TraceError(f"a {spatial}-D convolution (1-D to 3-D are lowered)")
    b = B(c)
    n, cin, _, h, wd = x.shape
    cout, cin_g, kd = w.shape[:3]
    depth = out[0]
    if padding[0]:
        x = pad(c, x, 2, padding[0], padding[0])
    taps = []
    for k in range(kd):
        start = k * dilation[0]
        t = b.slice(x, 2, start, start + stride[0] * (depth - 1) + 1, stride[0])
        taps.append(c.reshape(t, (n, groups, 1, cin // groups, depth, h, wd)))
    xs = b.concat(taps, 2)                               # (n, g, kd, cin/g, D', h, w)
    xs = c.transpose(xs, [0, 4, 1, 2, 3, 5, 6])
    xs = c.reshape(xs, (n * depth, groups * kd * (cin // groups), h, wd))
    w2 = c.transpose(w, [0, 2, 1, 3, 4])                 # (cout, kd, cin/g, kh, kw)
    w2 = c.reshape(w2, (cout, kd * cin_g) + tuple(w.shape[3:]))
    y = conv(c, xs, w2, bias, stride[1:], padding[1:], dilation[1:], groups)
    y = c.reshape(y, (n, depth, cout) + y.shape[2:])
    return c.transpose(y, [0, 2, 1, 3, 4])


def _max_along(c, x, axis, n_out):
    """Adaptive max pooling along one axis: each window's elements gathered
    into a row of the widest window's length (a shorter window padded by a
    -inf appended to the axis, never by repeating one of its elements: the
    max's gradient goes to every element equal to it, and a repeated one
    would receive it twice), then the row's max."""
    b = B(c)
    n_in = x.shape[axis]
    windows = _adaptive_windows(n_in, n_out)
    width = max(end - start for start, end in windows)
    index = torch.tensor([list(range(start, end)) + [n_in] * (width - (end - start))
                          for start, end in windows], dtype=torch.int64)
    if any(end - start < width for start, end in windows):
        shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
        x = b.concat([x, c.w.splat(-math.inf, shape, x.dtype)], axis)
    return b.reduce("reduce_max", b.gather(x, index, axis), [axis + 1], False)


@lowers("aten.adaptive_max_pool2d", "aten.adaptive_max_pool3d")
def _adaptive_max_pool(c, node, args, kwargs):
    """Whole windows over a batch of 2-D maps: a max pool. Otherwise
    (uneven windows, 3-D, unbatched) separable: the max along each spatial
    axis in turn. The indices are not written (nothing a step reads)."""
    x = c.v(args[0])
    out = [int(s) for s in args[1]]
    first = x.rank - len(out)
    if len(out) == 2 and x.rank == 4 and not any(x.shape[2 + i] % out[i] for i in range(2)):
        kernel = [x.shape[2] // out[0], x.shape[3] // out[1]]
        y = c.emit("fsdp.pool", [x], [(x.shape[:2] + tuple(out), x.dtype)],
                   {"mode": string("max"), "kernel": i64_array(kernel),
                    "strides": i64_array(kernel), "pads": i64_array([0, 0, 0, 0]),
                    "dilations": i64_array([1, 1]), "ceil_mode": bool_attr(False)})
        return [y, None]
    for i, n in enumerate(out):
        x = _max_along(c, x, first + i, n)
    return [x, None]


def _bound(node, args, kwargs):
    """The op's arguments by their schema names (positional or keyword,
    defaults filled): its overloads place attn_mask, is_causal and scale
    differently across PyTorch versions."""
    out = {}
    for i, a in enumerate(node.target._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            out[a.name] = args[i]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        else:
            out[a.name] = a.default_value if a.has_default_value() else None
    return out


@lowers("aten._scaled_dot_product_attention", "aten._scaled_dot_product_attention_forward",
        "aten.scaled_dot_product_attention", "aten._scaled_dot_product_flash_attention_for_cpu")
def _sdpa(c, node, args, kwargs):
    """softmax(q kᵀ · scale + mask) v, written out (fsdp-opt's attention
    fusion recognises it); scale 1/sqrt(d) unless given; grouped-query
    attention (enable_gqa: fewer key/value heads than query heads) repeats
    each key/value head over its group; dropout_p > 0 drops probabilities
    (fsdp.dropout)."""
    b = B(c)
    bound = _bound(node, args, kwargs)
    q, k, v = c.v(bound["query"]), c.v(bound["key"]), c.v(bound["value"])
    mask = bound.get("attn_mask")
    p = float(bound.get("dropout_p") or 0.0)
    causal = bool(bound.get("is_causal"))
    scale = bound.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if bound.get("enable_gqa") and q.rank >= 3 and k.shape[-3] != q.shape[-3]:
        k, v = _repeat_heads(c, k, q.shape[-3]), _repeat_heads(c, v, q.shape[-3])
    n, s = q.shape[-2], k.shape[-2]
    perm = list(range(k.rank - 2)) + [k.rank - 1, k.rank - 2]
    kt = c.transpose(k, perm)
    scores = c.emit("fsdp.matmul", [q, kt], [(q.shape[:-1] + (s,), q.dtype)])
    scores = b.mul(scores, scale)
    if mask is not None:
        m = c.v(mask)
        scores = (b.where(m, scores, -math.inf) if m.dtype == torch.bool
                  else b.add(scores, c.cast(m, q.dtype)))
    if causal:
        keep = c.w.constant(torch.ones(n, s, dtype=torch.bool).tril())
        scores = b.where(keep, scores, -math.inf)
    # A query whose every key is masked (a padded batch's rows under a
    # sliding window or left padding) gets zeros, as PyTorch 2.x's
    # attention gives it (its safe softmax), not softmax's NaN. Where the
    # mask is a constant keeping a key in every row, the plain form stays
    # (fsdp-opt fuses it into fsdp.attention); otherwise the rows are
    # found at run time and the product is left unfused.
    dead = None
    if mask is not None and not _every_row_kept(c, mask):
        top = b.reduce("reduce_max", scores, [scores.rank - 1], True)
        dead = b.eq(top, -math.inf)
        scores = b.where(dead, 0.0, scores)
    probs = c.emit("fsdp.softmax", [scores], [(scores.shape, q.dtype)],
                   {"axis": i64_attr(scores.rank - 1)})
    if dead is not None:
        probs = b.where(dead, 0.0, probs)
    if p > 0:
        # PyTorch drops attention probabilities (each query's weight on
        # each key), scaled by 1/(1-p): fsdp.dropout on them, drawn in the
        # plan. The fused attention then does not apply (its kernels have
        # no dropout); the product stays unfused.
        probs = dropout(c, probs, p)
    out = c.emit("fsdp.matmul", [probs, v], [(q.shape[:-1] + (v.shape[-1],), q.dtype)])
    named = node.target.overloadpacket.__name__
    if named == "_scaled_dot_product_flash_attention_for_cpu":
        return [out, None]  # (output, logsumexp): the backward's, never read forward
    return [out, probs] if named.startswith("_") else out


def _every_row_kept(c, mask):
    """Whether `mask` (an attention mask node) is a constant keeping at
    least one key in every query's row: True only where that is known at
    trace time."""
    if mask not in c.constant_nodes:
        return False
    value = c.const_value(mask)
    keep = value if value.dtype == torch.bool else value > -math.inf
    return bool(keep.reshape(-1, keep.shape[-1]).any(-1).all()) if keep.dim() else bool(keep)


def _repeat_heads(c, x, heads):
    """[..., Hkv, S, D] -> [..., heads, S, D], each head repeated over its
    group of heads / Hkv query heads (torch's repeat_interleave)."""
    hkv = x.shape[-3]
    if heads % hkv:
        raise TraceError(f"enable_gqa: {heads} query heads are no multiple of {hkv} key heads")
    lead, (S, D) = tuple(x.shape[:-3]), x.shape[-2:]
    grouped = c.reshape(x, lead + (hkv, 1, S, D))
    wide = c.emit("fsdp.broadcast", [grouped], [(lead + (hkv, heads // hkv, S, D), x.dtype)])
    return c.reshape(wide, lead + (heads, S, D))


@lowers("aten.native_group_norm")
def _group_norm(c, node, args, kwargs):
    """Layer norm over each group's (C/G)·HW elements, then the per-channel
    affine."""
    b = B(c)
    x = c.v(args[0])
    weight, bias = args[1], args[2]
    n, ch, hw, groups, eps = (int(args[3]), int(args[4]), int(args[5]), int(args[6]),
                              float(args[7]))
    per = ch // groups * hw
    g = c.reshape(x, (n, groups, per))
    ones = c.w.splat(1.0, (per,), x.dtype)
    y = c.emit("fsdp.layer_norm", [g, ones], [(g.shape, x.dtype)],
               {"axis": i64_attr(2), "epsilon": f32_attr(eps)})
    y = c.reshape(y, x.shape)
    per_channel = (ch,) + (1,) * (x.rank - 2)
    if weight is not None:
        y = b.mul(y, c.reshape(c.v(weight), per_channel))
    if bias is not None:
        y = b.add(y, c.reshape(c.v(bias), per_channel))
    return [y, None, None]


@lowers("aten._weight_norm_interface")
def _weight_norm(c, node, args, kwargs):
    """weight_norm's w = g · v / ‖v‖, the norm over every axis but `dim`
    (wav2vec2's positional convolution); returns (w, ‖v‖) as ATen does."""
    b = B(c)
    v, g = c.v(args[0]), c.v(args[1])
    d = int(arg(args, kwargs, 2, "dim", 0)) % max(v.rank, 1)
    axes = [i for i in range(v.rank) if i != d]
    norm = b.un("sqrt", b.reduce("reduce_sum", b.mul(v, v), axes, True)) if axes else b.un("abs", v)
    return [b.mul(v, b.div(c.reshape(g, norm.shape), norm)), norm]


def _window_counts(n, k, s, p, n_out, include_pad):
    """Per output position along one axis, how many elements its window
    averages over: the input's (include_pad false) or, as PyTorch counts
    them, the padded input's up to its end (a ceil_mode window past it is
    cut there)."""
    counts = []
    for o in range(n_out):
        start = o * s - p
        end = min(start + k, n + p)
        counts.append(end - start if include_pad else min(start + k, n) - max(start, 0))
    return torch.tensor(counts, dtype=torch.float64)


@lowers("aten.max_pool3d_with_indices", "aten.avg_pool3d")
def _pool3d(c, node, args, kwargs):
    """3-D pooling, separable: the 2-D pool of each depth slice (the depth
    folded into the channels), then the depth windows as strided slices of
    the depth axis. Max: the windows' slices compared in turn, a later one
    taken only where it is greater (or NaN), so the gradient goes to the
    first maximum in PyTorch's (depth, row, column) order. Average: the 2-D
    pool's window sums (its mean over the real elements times their count),
    summed over the depth window and divided by PyTorch's divisor, a
    product of per-axis counts (or divisor_override)."""
    b = B(c)
    is_max = "max" in op_name(node.target)
    x = c.v(args[0])
    shape, dtype = (c.meta(next(u for u in node.users if u.args[1] == 0)) if is_max
                    else c.out())
    unbatched = x.rank == 4
    if unbatched:
        x, shape = c.reshape(x, (1,) + x.shape), (1,) + tuple(shape)
    three = lambda v: [int(v[0])] * 3 if len(v) == 1 else [int(i) for i in v]  # noqa: E731
    kernel = three(args[1])
    stride = three(args[2]) if len(args) > 2 and args[2] else kernel
    padding = three(args[3]) if len(args) > 3 else [0, 0, 0]
    n, ch, depth, h, w = x.shape
    d_out, h_out, w_out = shape[2:]
    flat = c.reshape(x, (n, ch * depth, h, w))
    props = {"kernel": i64_array(kernel[1:]), "strides": i64_array(stride[1:]),
             "pads": i64_array(padding[1:] * 2)}
    if is_max:
        dilation = three(args[4]) if len(args) > 4 else [1, 1, 1]
        ceil = bool(args[5]) if len(args) > 5 else False
        props.update(mode=string("max"), dilations=i64_array(dilation[1:]),
                     ceil_mode=bool_attr(ceil))
    else:
        dilation = [1, 1, 1]
        ceil = bool(args[4]) if len(args) > 4 else False
        include = bool(args[5]) if len(args) > 5 else True
        divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
        props.update(mode=string("avg"), dilations=i64_array([1, 1]), ceil_mode=bool_attr(ceil),
                     count_include_pad=bool_attr(False))
    y = c.emit("fsdp.pool", [flat], [((n, ch * depth, h_out, w_out), dtype)], props)
    y = c.reshape(y, (n, ch, depth, h_out, w_out))
    if not is_max:  # each depth slice's window sums
        real = [_window_counts(size, k, s, p, m, False) for size, k, s, p, m in
                zip((h, w), kernel[1:], stride[1:], padding[1:], (h_out, w_out))]
        y = b.mul(y, c.w.constant((real[0][:, None] * real[1][None, :]).to(dtype)))
    # the depth windows: padded so that every window's slice is in range
    kd, sd, pd, dd = kernel[0], stride[0], padding[0], dilation[0]
    length = max(depth + 2 * pd, (d_out - 1) * sd + dd * (kd - 1) + 1)
    y = pad(c, y, 2, pd, length - depth - pd, -math.inf if is_max else 0)
    taps = [b.slice(y, 2, k * dd, k * dd + sd * (d_out - 1) + 1, sd) for k in range(kd)]
    out = taps[0]
    for t in taps[1:]:
        if is_max:
            out = b.where(c.emit("fsdp.or", [b.gt(t, out), b.isnan(t)],
                                 [(t.shape, torch.bool)]), t, out)
        else:
            out = b.add(out, t)
    if not is_max:
        if divisor is not None:
            scale = torch.full((d_out, h_out, w_out), 1.0 / float(divisor), dtype=torch.float64)
        else:
            counts = [_window_counts(size, k, s, p, m, include) for size, k, s, p, m in
                      zip((depth, h, w), kernel, stride, padding, (d_out, h_out, w_out))]
            scale = 1.0 / (counts[0][:, None, None] * counts[1][None, :, None]
                           * counts[2][None, None, :])
        out = b.mul(out, c.w.constant(scale.to(dtype)))
    if unbatched:
        out = c.reshape(out, tuple(shape[1:]))
    return [out, None] if is_max else out
