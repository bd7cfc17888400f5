"""Graph rewrites before lowering: products as the model wrote them.

ATen decomposes `torch.matmul` and `nn.Linear` on inputs of rank 3 or more
into reshapes around a 2-D or 3-D product: `q @ k.transpose(-2, -1)` becomes
expand -> view [B*H, T, D] -> bmm -> view [B, H, T, T]. fsdp-opt recognises
attention, and prices products, on the batched form ONNX keeps; this puts it
back: the product of the tensors before the reshapes, broadcast over their
batch dimensions (`fsdp.matmul`'s semantics), whenever that gives exactly
the shape the model reshaped the result to.
"""
import math

import torch

from .lower import cross_entropy, op_name

VIEWS = {"aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.reshape"}


def _shape(node):
    m = node.meta.get("tensor_meta") if isinstance(node, torch.fx.Node) else None
    return tuple(m.shape) if m is not None and hasattr(m, "shape") else None


def _batch_sources(x):
    """Tensors `x` ([batch, n, k]) is a batch-flattening view or a batch
    broadcast of, nearest first."""
    out, cur = [], x
    while isinstance(cur, torch.fx.Node) and cur.op == "call_function":
        name = op_name(cur.target)
        if name not in VIEWS and name != "aten.expand":
            break
        inp = cur.args[0]
        s, si = _shape(cur), _shape(inp)
        if s is None or si is None or len(si) < 2 or si[-2:] != s[-2:]:
            break
        if name != "aten.expand" and math.prod(si[:-2]) != math.prod(s[:-2]):
            break
        out.append(inp)
        cur = inp
    return out


def _row_sources(x):
    """Tensors `x` ([M, k]) is a view of with M = the product of their
    leading extents, nearest first."""
    out, cur = [], x
    while isinstance(cur, torch.fx.Node) and op_name(cur.target) in VIEWS:
        inp = cur.args[0]
        s, si = _shape(cur), _shape(inp)
        if s is None or si is None or len(si) < 2 or si[-1] != s[-1] or \
                math.prod(si[:-1]) != s[0]:
            break
        out.append(inp)
        cur = inp
    return out


def _broadcast(a, b):
    try:
        return tuple(torch.broadcast_shapes(torch.Size(a), torch.Size(b)))
    except RuntimeError:
        return None


def _replace(node, new):
    """`new` computes what `node` did: it takes its shape, module path and
    uses."""
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)


def fold_batched_products(gm):
    """Rewrites view(bmm(view(a), view(b))) into matmul(a, b) and
    view(mm|addmm(view(x), w)) into the product of x (rank 3+) and w."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or op_name(node.target) not in VIEWS:
            continue
        prod = node.args[0]
        if not isinstance(prod, torch.fx.Node) or len(prod.users) != 1 or \
                prod.op != "call_function":
            continue
        name = op_name(prod.target)
        out = _shape(node)
        if name == "aten.bmm":
            a, b = prod.args[:2]
            n, p = _shape(a)[-2], _shape(b)[-1]
            found = None
            for ca in reversed(_batch_sources(a)):
                for cb in reversed(_batch_sources(b)):
                    batch = _broadcast(_shape(ca)[:-2], _shape(cb)[:-2])
                    if batch is not None and batch + (n, p) == out:
                        found = (ca, cb)
                        break
                if found:
                    break
            if not found:
                continue
            target, args = torch.ops.aten.matmul.default, found
        elif name in ("aten.mm", "aten.addmm"):
            if name == "aten.addmm" and prod.kwargs:
                continue
            x, w = (prod.args[1], prod.args[2]) if name == "aten.addmm" else prod.args[:2]
            p = _shape(w)[-1]
            found = next((c for c in reversed(_row_sources(x))
                          if _shape(c)[:-1] + (p,) == out), None)
            if found is None:
                continue
            target = prod.target
            args = (prod.args[0], found, w) if name == "aten.addmm" else (found, w)
        else:
            continue
        with graph.inserting_before(node):
            _replace(node, graph.call_function(target, tuple(args)))
        changed = True
    if changed:
        graph.eliminate_dead_code()
    return changed


def _converts(lsm):
    """Whether a log-softmax node changes its input's dtype."""
    third = lsm.args[2] if len(lsm.args) > 2 else lsm.kwargs.get("dtype")
    if op_name(lsm.target) == "aten._log_softmax":
        return bool(third)  # half_to_float
    m = lsm.args[0].meta.get("tensor_meta") if isinstance(lsm.args[0], torch.fx.Node) else None
    return third is not None and (m is None or third != m.dtype)


def fold_cross_entropy(gm):
    """nll_loss(log_softmax(z, class axis)) -> cross_entropy(z): F.cross_entropy
    as ATen writes it, one pass over the logits forward and backward. Also
    through a view that flattens the leading axes of log_softmax(z, -1)
    (`log_softmax(logits, -1).view(-1, V)`): cross_entropy(view(z))."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or op_name(node.target) not in (
                "aten.nll_loss_forward", "aten.nll_loss2d_forward"):
            continue
        lsm, view = node.args[0], None
        if isinstance(lsm, torch.fx.Node) and op_name(lsm.target) in VIEWS and \
                len(lsm.users) == 1:
            view, lsm = lsm, lsm.args[0]
        # _log_softmax(z, dim, half_to_float) as make_fx writes it, or
        # log_softmax(z, dim, dtype) as torch.export keeps it; neither
        # converting.
        if not isinstance(lsm, torch.fx.Node) or len(lsm.users) != 1 or \
                op_name(lsm.target) not in ("aten._log_softmax", "aten.log_softmax") or \
                _converts(lsm):
            continue
        shape = _shape(lsm)
        if shape is None or len(shape) < 2:
            continue
        axis = lsm.args[1] % len(shape)
        logits = lsm.args[0]
        with graph.inserting_before(node):
            if view is not None:
                flat = _shape(view)
                if axis != len(shape) - 1 or len(flat) != 2 or flat[1] != shape[-1]:
                    continue
                logits = graph.call_function(torch.ops.aten.view.default,
                                             (logits, list(flat)))
                logits.meta = dict(view.meta)
            elif axis != 1:
                continue
            _replace(node, graph.call_function(cross_entropy,
                                               (logits,) + tuple(node.args[1:5])))
        changed = True
    if changed:
        graph.eliminate_dead_code()
    return changed
