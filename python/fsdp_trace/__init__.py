"""fsdp_trace: a PyTorch module, traced, as the fsdp dialect's MLIR text.

    import fsdp_trace
    traced = fsdp_trace.trace(model, {"input_ids": ids, "targets": targets},
                              loss_fn=lambda logits, t: F.cross_entropy(
                                  logits.flatten(0, 1), t.flatten()))
    traced.save("model.mlir")        # and model.safetensors, the weights
    # fsdp-opt model.mlir --world-size=8 --wrap=class:Block -o model.plan

The module is traced in training mode (restored afterwards) to ATen ops with
torch.fx, forward and loss together. Each parameter is an `fsdp.parameter`
named by its fully qualified name (the state_dict key), with its module path
and the class of every enclosing module (for `--wrap=class:NAME`); buffers
are marked as buffers; tied parameters are one symbol. A model built inside
`with fsdp_trace.meta_device():` is traced from shapes alone and no weights
are written.
"""
import math
import os

import torch

from .capture import FRONTENDS, capture, meta_device  # noqa: F401 (public)
from .decompose.draws import LOWERED as DRAWN
from .lower import LOWERINGS, Context, is_random, op_name
from . import decompose  # noqa: F401 (registers its lowerings)
from .patterns import fold_batched_products, fold_cross_entropy
from .mlir import TraceError, Value, Writer, string, symbol, tensor_type  # noqa: F401
from .safetensors import write_safetensors

__all__ = ["trace", "meta_device", "Traced", "TraceError", "capture_frontends"]


def capture_frontends():
    """The values trace()'s `frontend` takes."""
    return list(FRONTENDS)


class Traced:
    """The result of trace(): MLIR text, and the weights to write beside it."""

    def __init__(self, body, header, tensors, used):
        self._body = body
        self._header = header
        self.tensors = tensors
        self.used = used
        self.meta = any(t.tensor.is_meta for t in tensors)
        self.no_split = []          # transformers' _no_split_modules (held ones)
        self.frontend = "make_fx"   # or "export": what captured the graph
        self.export_error = None    # why torch.export did not, where it did not
        self.checkpointed_calls = 0  # torch.utils.checkpoint calls while traced

    def text(self, weights_path=None, mlir_path=None):
        """The MLIR text; `weights_path` is named in it (fsdp.source)
        relative to the directory of `mlir_path` when it lies below it (as
        ONNX names its external data: fsdp-run then follows no link below
        the directory the user names), absolute otherwise."""
        attrs = ['fsdp.frontend = ' + string(
            "torch.export" if self.frontend == "export" else "torch.fx")]
        if self.checkpointed_calls:
            attrs.append(f"fsdp.checkpointed_calls = {self.checkpointed_calls} : i64")
        if self.no_split:
            attrs.append("fsdp.no_split_modules = [" +
                         ", ".join(string(c) for c in self.no_split) + "]")
        if weights_path:
            source = os.path.abspath(weights_path)
            if mlir_path:
                rel = os.path.relpath(source, os.path.dirname(os.path.abspath(mlir_path)))
                if not rel.startswith(".." + os.sep) and rel != "..":
                    source = rel
            attrs.insert(0, f"fsdp.source = {string(source)}")
        return (f"module attributes {{{', '.join(attrs)}}} {{\n" + self._header +
                self._body + "}\n")

    def save(self, path, weights=None):
        """Writes the MLIR text to `path` and, unless the model is on the
        meta device, its parameters and buffers (those the step reads) as
        safetensors to `weights` (default: beside it, `.safetensors`)."""
        if weights is None and not self.meta:
            weights = os.path.splitext(path)[0] + ".safetensors"
        if weights:
            if self.meta:
                raise TraceError("the model is on the meta device: it has no weights to write")
            write_safetensors(weights, {t.name: t.tensor for t in self.tensors
                                        if t.name in self.used})
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.text(weights, path))
        os.replace(tmp, path)
        return weights


def _ops_where(gm, pick):
    """The ATen ops of the nodes `pick` selects, each with the module paths
    that use it, as the lines of an error (four paths at most a line)."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and pick(node):
            paths = found.setdefault(op_name(node.target), [])
            path = node.meta.get("module_path", "") or "<root>"
            if path not in paths:
                paths.append(path)
    return [f"  {name}  (in {', '.join(paths[:4])}{', ...' if len(paths) > 4 else ''})"
            for name, paths in sorted(found.items())]


_DROPOUTS = ("aten.dropout", "aten.native_dropout", "aten.feature_dropout",
             "aten.alpha_dropout", "aten.feature_alpha_dropout")


def _identity_dropout(node):
    """A dropout op (input, p, train) that draws nothing: p = 0 or eval;
    or an attention with dropout_p = 0 (torch.export keeps
    scaled_dot_product_attention whole, and PyTorch tags it random for its
    dropout)."""
    if op_name(node.target) == "aten.scaled_dot_product_attention":
        p = node.args[4] if len(node.args) > 4 else node.kwargs.get("dropout_p", 0.0)
        return isinstance(p, (int, float)) and p == 0
    if op_name(node.target) not in _DROPOUTS or len(node.args) < 3:
        return False
    p, train = node.args[1], node.args[2]
    return isinstance(p, (int, float)) and (p == 0 or train is False)


_ATTENTIONS = ("aten.scaled_dot_product_attention", "aten._scaled_dot_product_attention",
               "aten._scaled_dot_product_attention_forward",
               "aten._scaled_dot_product_flash_attention_for_cpu")


def _elementwise_dropout(node):
    """torch's dropout (each element on its own), and an attention's
    dropout of its probabilities: fsdp.dropout draws its mask in the plan
    (common/Philox.h)."""
    return op_name(node.target) in ("aten.dropout", "aten.native_dropout") + _ATTENTIONS


def _refuse_random(gm, module):
    """The plan draws dropout's masks (fsdp.dropout) and the draws of
    decompose/draws.py (rand, randn, uniform_, normal_, exponential_,
    bernoulli, randint, rrelu, multinomial, randperm: fsdp.uniform) at every
    step. Any other random op (poisson, ...) would be folded into one
    value drawn at trace time and applied at every step, training something
    other than the model: each such op is refused, with its modules.
    Dropout with p = 0 or in eval mode traces to no op at all."""
    lines = _ops_where(gm, lambda n: is_random(n.target) and not _identity_dropout(n)
                       and not _elementwise_dropout(n) and op_name(n.target) not in DRAWN)
    if lines:
        raise TraceError(f"{len(lines)} random ATen op(s) in {type(module).__name__} that the plan "
                         f"cannot draw, and a value drawn once at trace time would be the "
                         f"same at every step:\n" + "\n".join(lines) +
                         "\n(trace with these disabled, p=0, or in eval mode, train=False)")


def _no_split_modules(module):
    """The layer classes a Hugging Face model names as `_no_split_modules`
    (its decoder layers; BERT's embeddings too), those it holds: the units
    Accelerate's TRANSFORMER_BASED_WRAP makes, which fsdp-opt's default
    policy then makes. The first model found from the root down says."""
    held = {type(m).__name__ for m in module.modules()}
    for m in module.modules():
        names = getattr(m, "_no_split_modules", None)
        if isinstance(names, (list, tuple, set)) and names:
            return sorted(str(n) for n in names if str(n) in held)
    return []


def trace(module, example_inputs, loss_fn=None, train=True, seed=0, frontend="auto"):
    """Traces `module` on `example_inputs` (a dict name -> tensor, or a tuple
    in forward's order); with `loss_fn`, the step's output is
    `loss_fn(output, *rest)`, `rest` being the inputs forward does not take
    (e.g. the targets). Returns a Traced; raises TraceError listing every
    ATen op that has no fsdp lowering, with the module each comes from.
    `seed` keys every dropout's random stream (each its own). `frontend`:
    "export" (torch.export, PyTorch 2.3+), "make_fx" (every PyTorch from
    1.13), or "auto" (export where there is one, else or where export
    cannot take the model, make_fx); `Traced.frontend` says which traced
    it and `Traced.export_error` why export did not."""
    was = module.training
    module.train(train)
    try:
        gm, tensors, inputs, (used_frontend, export_error) = capture(
            module, example_inputs, loss_fn, frontend)
    finally:
        module.train(was)
    fold_batched_products(gm)
    fold_cross_entropy(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(tensors) + len(inputs):
        raise TraceError(f"the trace has {len(placeholders)} inputs, expected "
                         f"{len(tensors)} parameters and buffers and {len(inputs)} inputs")

    _refuse_random(gm, module)

    # Constants: values that depend on no placeholder. An integer buffer
    # (Swin's relative-position index, a lengths table) is never trained:
    # its value as the module holds it is a constant of the step.
    int_buffers = {node: entry.tensor for entry, node in zip(tensors, placeholders)
                   if entry.buffer and not entry.tensor.dtype.is_floating_point
                   and not entry.tensor.is_meta and node.users}
    # A tensor with no elements (an empty index, its gather) holds nothing
    # the data or the parameters could change, and passes no gradient: a
    # constant, whatever it is computed from (a data input of no elements
    # is not a plan input of zero rows).
    # (A parameter with no elements stays one: a checkpoint names it.)
    held = set(placeholders[:len(tensors)])
    empty = {node: torch.empty(tuple(m.shape), dtype=m.dtype)
             for node in gm.graph.nodes
             if node.op in ("placeholder", "call_function") and node not in held
             for m in [node.meta.get("tensor_meta")]
             if hasattr(m, "shape") and math.prod(m.shape) == 0}
    constant_nodes = set(int_buffers)
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            constant_nodes.add(node)
        elif node.op == "call_function":
            # A draw is never a constant, even of no input (torch.rand(3)).
            if all(d in constant_nodes for d in node.all_input_nodes) and \
                    not is_random(node.target):
                constant_nodes.add(node)
    # Not a source of constants for what they feed (a product of empty
    # factors is a tensor of zeros, lowered as a product): the lowering
    # reads them as empty constants.
    constant_nodes |= set(empty)
    lines = _ops_where(gm, lambda n: n not in constant_nodes
                       and op_name(n.target) not in LOWERINGS)
    if lines:
        raise TraceError(f"{len(lines)} ATen op(s) of {type(module).__name__} have no "
                         f"fsdp lowering:\n" + "\n".join(lines))

    w = Writer()
    env = {}
    used = set()
    header = []
    for entry, node in zip(tensors, placeholders):
        if not node.users or node in int_buffers:
            continue
        shape, dtype = tuple(entry.tensor.shape), entry.tensor.dtype
        if dtype.is_complex:
            raise TraceError(f"'{entry.name}' is {dtype}: a plan holds no complex tensor "
                             f"(complex values computed inside the step trace, as rotary "
                             f"embeddings make them; a complex parameter does not)")
        if not dtype.is_floating_point:
            raise TraceError(f"'{entry.name}' is {dtype}: the step reads integer "
                             f"buffers only as constants (not supported)")
        attrs = [f"module_path = {string(entry.module_path)}",
                 "module_classes = [" + ", ".join(string(c) for c in entry.classes) + "]"]
        if entry.buffer:
            attrs.append("buffer")
        elif not entry.tensor.requires_grad:
            attrs.append("frozen")
        header.append(f"  fsdp.parameter {symbol(entry.name)} : "
                      f"{tensor_type(shape, dtype)} {{{', '.join(attrs)}}}\n")
        used.add(entry.name)

        def read(entry=entry, shape=shape, dtype=dtype):
            return w.op("fsdp.get_parameter", [], [(shape, dtype)],
                        {"param": symbol(entry.name)})[0]
        env[node] = read
    args = []
    for (name, t), node in zip(inputs, placeholders[len(tensors):]):
        if node in empty:
            continue
        if t.is_complex():
            raise TraceError(f"input '{name}' is {t.dtype}: a plan's inputs are real (pass "
                             f"torch.view_as_real of it, and view_as_complex inside the step)")
        v = Value(f"%arg{len(args)}", t.shape, t.dtype)
        args.append(f"{v.name}: {v.type} {{fsdp.name = {string(name)}}}")
        env[node] = v

    c = Context(gm, w, env, constant_nodes,
                {node: entry.name for entry, node in zip(tensors, placeholders)})
    c.seed = int(seed)
    c.const.update({node: t.detach().clone() for node, t in int_buffers.items()})
    c.const.update(empty)
    outputs = []
    for node in gm.graph.nodes:
        c.node = node
        if node.op == "call_function" and node not in constant_nodes:
            name = op_name(node.target)
            try:
                env[node] = c.lowering(node)(c, node, node.args, node.kwargs)
            except TraceError as e:
                where = node.meta.get("module_path") or "<root>"
                raise TraceError(f"{name} in {where}: {e}") from None
        elif node.op == "output":
            outputs = torch.utils._pytree.tree_flatten(node.args[0])[0]
    c.node = None
    results = [c.v(o) for o in outputs]
    if len(results) == 1 and results[0].rank == 0:
        names = ["loss"]
    else:
        names = ["output"] if len(results) == 1 else [f"output{i}" for i in range(len(results))]
    sig = ", ".join(f"{v.type} {{fsdp.name = {string(n)}}}" for v, n in zip(results, names))
    body = (f"  func.func @forward({', '.join(args)}) -> ({sig}) {{\n" +
            "\n".join(w.lines) + "\n" +
            f"    func.return {', '.join(v.name for v in results)} : "
            f"{', '.join(v.type for v in results)}\n  }}\n")
    traced = Traced(body, "".join(header), tensors, used)
    traced.frontend, traced.export_error = used_frontend, export_error
    traced.no_split = _no_split_modules(module)
    traced.checkpointed_calls = gm.meta.get("fsdp_checkpointed_calls", 0)
    return traced
