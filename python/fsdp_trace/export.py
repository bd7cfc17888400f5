"""Capture through torch.export, the front end PyTorch 2.x supports.

`torch.export.export(..., strict=False)` runs the model's Python on fake
tensors and records an ATen graph whose signature says which placeholder is
which parameter, buffer, lifted constant or user input; each node carries
the module stack it was traced in (`nn_module_stack`). `run_decompositions`
then makes it functional and decomposes only the ops fsdp has no lowering
of (the same rule as make_fx's table on PyTorch 1.13, capture.py).

The graph is rewritten into the form the lowering reads (capture.py's
contract): one placeholder per distinct parameter or buffer in the order
of `tensors` (tied names read one placeholder), then the data inputs;
lifted constants as attributes of the graph module (get_attr); only the
user's output (a buffer update such as batch norm's running statistics
leaves the module as it was, as on the make_fx path); `module_path` in
each node's meta.
"""
import contextlib
import os
import re
import sys
import warnings

import torch
import torch.fx

from .mlir import TraceError

PREFIX = "model"  # the wrapped module's name inside the exported Step


class _Step(torch.nn.Module):
    """forward, then the loss, as one module torch.export can take."""

    def __init__(self, module, names, forward_args, rest, positional, loss_fn):
        super().__init__()
        setattr(self, PREFIX, module)
        self._names, self._forward_args, self._rest = names, forward_args, rest
        self._positional, self._loss_fn = positional, loss_fn

    def forward(self, *data):
        values = dict(zip(self._names, data))
        model = getattr(self, PREFIX)
        if self._positional:
            out = model(*(values[n] for n in self._forward_args))
        else:
            out = model(**{n: values[n] for n in self._forward_args})
        if self._loss_fn is not None:
            out = self._loss_fn(out, *(values[n] for n in self._rest))
        return out


def available():
    """Whether this PyTorch has torch.export with non-strict capture (2.3+)."""
    export = getattr(torch, "export", None)
    if export is None or not hasattr(export, "export"):
        return False
    import inspect
    try:
        return "strict" in inspect.signature(export.export).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


# Composite ops export keeps whole (make_fx never sees them) whose lowering
# takes only the forms make_fx left: decomposed by PyTorch instead.
DECOMPOSED = {"aten.inner"}


def _table():
    """PyTorch's default (core ATen) decompositions and make_fx's table
    (capture._decompositions: any, the losses, ...), less every op fsdp
    lowers itself and every random op (a draw must stay visible to be
    refused or lowered as one fsdp.dropout)."""
    from .capture import _decompositions
    from .lower import LOWERINGS, SPLATS, is_random, op_name
    table = torch.export.default_decompositions()
    for op, fn in _decompositions().items():
        if op not in table:
            table[op] = fn
    for op in list(table.keys()):
        name = op_name(op)
        if name in DECOMPOSED:
            continue
        if name in LOWERINGS or name in SPLATS:
            del table[op]
        elif is_random(op) and not _composite(op):
            # A random op made of others (aten.gru: its dropout between
            # layers) decomposes, as make_fx's dispatch decomposes it; one
            # that is itself a draw stays, to be refused by name.
            del table[op]
    return table


def _composite(op):
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(
            op.name(), "CompositeImplicitAutograd")
    except (AttributeError, RuntimeError):  # pragma: no cover
        return False


_CHECKS = {"_assert_tensor_metadata", "_assert_scalar", "_assert_async",
           "sym_constrain_range", "sym_constrain_range_for_size"}


def _strip(fqn):
    if fqn == PREFIX:
        return ""
    return fqn[len(PREFIX) + 1:] if fqn.startswith(PREFIX + ".") else fqn


def _module_path(node):
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return _strip(str(path))


@contextlib.contextmanager
def _tensor_checks_as_ops(checks):
    """torch._check_tensor_all(_with) on a tensor from the data (transformers'
    `torch_compilable_check`: LLaVA's placeholder count against its image
    features) reads the tensor's value, which non-strict export carries as
    an unbacked size that its decompositions then fail on. Traced instead as
    aten._assert_async of the condition, a graph op on the tensor; the plan
    does not run it (fsdp-run has no data checks), which `checks` records,
    as 'FILE:LINE', for the note capture_export prints."""
    def check(cond):
        frame = sys._getframe(2)  # the caller of the patched torch function
        while frame is not None and "transformers/utils" in frame.f_code.co_filename:
            frame = frame.f_back  # the model's line, not its helper's
        if frame is not None:
            checks.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
        torch.ops.aten._assert_async.msg(cond.all(), "a check of the data")

    patched = {"_check_tensor_all": lambda cond, message=None: check(cond),
               "_check_tensor_all_with": lambda error_type, cond, message=None: check(cond)}
    saved = {name: getattr(torch, name, None) for name in patched}
    for name, fn in patched.items():
        if saved[name] is not None:
            setattr(torch, name, fn)
    try:
        yield
    finally:
        for name, original in saved.items():
            if original is not None:
                setattr(torch, name, original)


def _stack_line(node):
    """' at FILE:LINE `code`' of the model's line in the node's stack trace
    (capture.model_line's frame)."""
    from .capture import model_line
    lines = (node.meta.get("stack_trace") or "").splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)", line (\d+)', line)
        if m:
            frames.append((m.group(1), m.group(2), lines[i + 1] if i + 1 < len(lines) else ""))
    return model_line(frames)


def _refuse_data_dependent_shapes(gm):
    """A result whose size depends on the values (nonzero, a boolean-mask
    index, tensor_split at a tensor of indices): torch.export carries the
    size as an unbacked symbol, where a plan fixes every shape before it
    runs. Refused, naming the op, its module and the model's line."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else [val]:
            shape = getattr(v, "shape", None)
            if shape is not None and not all(isinstance(d, int) for d in shape):
                from .lower import op_name
                raise TraceError(
                    f"{op_name(node.target)} in {_module_path(node) or '<root>'}: its result's shape "
                    f"{tuple(str(d) for d in shape)} depends on the values of the "
                    f"data{_stack_line(node)}; a plan fixes every shape before it runs "
                    f"(write the step with fixed shapes: torch.where instead of a "
                    f"boolean-mask index or nonzero, split points as Python numbers)")


def capture_export(module, tensors, inputs, forward_args, rest, positional, loss_fn, contexts):
    """The step traced by torch.export, as a graph module in capture.py's
    form. `contexts` builds the context managers to trace under (dropout as
    one op, RNN weights refreshed, the meta device)."""
    from torch.export.graph_signature import InputKind, OutputKind
    names = [n for n, _ in inputs]
    step = _Step(module, names, forward_args, rest, positional, loss_fn)
    data = tuple(t for _, t in inputs)
    checks = []
    with contexts(), _tensor_checks_as_ops(checks), warnings.catch_warnings():
        # PyTorch's own deprecations inside export (pytree's LeafSpec), not
        # the user's.
        warnings.simplefilter("ignore", FutureWarning)
        # RNNs' weight list rebuilt from the traced weights on each call
        # (capture._rnn_weights_traced) is an attribute export would rather
        # see registered; what it holds are the parameters it already reads.
        warnings.filterwarnings("ignore", message=r".*were assigned during export.*")
        ep = torch.export.export(step, data, strict=False)
        ep = ep.run_decompositions(_table())
    gm = ep.graph_module
    _refuse_data_dependent_shapes(gm)
    graph = gm.graph
    sig = ep.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(sig.input_specs):
        raise TraceError(f"torch.export gave {len(placeholders)} placeholders for "
                         f"{len(sig.input_specs)} inputs")
    owner = {}
    for i, entry in enumerate(tensors):
        for alias in entry.aliases:
            owner[alias] = i
    chosen = [None] * len(tensors)   # the placeholder each tensor is read through
    user = []
    first = next(iter(graph.nodes))
    for node, spec in zip(placeholders, sig.input_specs):
        kind = spec.kind
        if kind in (InputKind.PARAMETER, InputKind.BUFFER):
            i = owner.get(_strip(spec.target))
            if i is None:
                raise TraceError(f"torch.export read '{_strip(spec.target)}', which is not "
                                 f"a parameter or buffer of {type(module).__name__}")
            if chosen[i] is None:
                chosen[i] = node
            else:  # a tied name: one tensor, one placeholder
                node.replace_all_uses_with(chosen[i])
                graph.erase_node(node)
        elif kind == InputKind.CONSTANT_TENSOR:
            attr = "_fsdp_constant_" + spec.arg.name
            value = ep.constants[spec.target]
            if isinstance(value, torch.Tensor):
                gm.register_buffer(attr, value.detach())
            else:
                setattr(gm, attr, value)
            with graph.inserting_before(first):
                const = graph.get_attr(attr)
            node.replace_all_uses_with(const)
            graph.erase_node(node)
        elif kind == InputKind.USER_INPUT:
            user.append(node)
        else:
            raise TraceError(f"torch.export gave an input of kind {kind.name}, "
                             f"which fsdp_trace does not read")
    # Placeholders in capture.py's order: every tensor's, then the inputs'.
    ordered = []
    with graph.inserting_before(next(iter(graph.nodes))):
        for i, entry in enumerate(tensors):
            p = graph.placeholder(f"t{i}")
            p.meta.update(chosen[i].meta if chosen[i] is not None else {})
            if chosen[i] is not None:
                chosen[i].replace_all_uses_with(p)
            ordered.append(p)
        for j, old in enumerate(user):
            p = graph.placeholder(f"in{j}")
            p.meta.update(old.meta)
            old.replace_all_uses_with(p)
            ordered.append(p)
    for old in [n for n in chosen if n is not None] + user:
        graph.erase_node(old)
    # Only the user's outputs: a buffer update (batch norm's running
    # statistics) leaves the module's state alone.
    out = next(n for n in graph.nodes if n.op == "output")
    results = list(out.args[0])
    kept = [r for r, spec in zip(results, sig.output_specs)
            if spec.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]
    mutated = [spec.kind.name for spec in sig.output_specs
               if spec.kind in (OutputKind.PARAMETER_MUTATION, OutputKind.USER_INPUT_MUTATION)]
    if mutated:
        raise TraceError(f"forward writes to a parameter or an input in place "
                         f"({', '.join(sorted(set(mutated)))}): a step may only read them")
    out.args = (kept[0] if len(kept) == 1 else tuple(kept),)
    from torch.fx.passes.shape_prop import _extract_tensor_metadata
    for node in graph.nodes:
        node.meta["module_path"] = _module_path(node)
        val = node.meta.get("val")
        if "tensor_meta" not in node.meta and isinstance(val, torch.Tensor):
            node.meta["tensor_meta"] = _extract_tensor_metadata(val)
    # Export's run-time checks of what was traced (a `.to()`'s dtype and
    # layout, a size's range): the plan's shapes and dtypes are fixed, so
    # they hold by construction.
    for node in list(graph.nodes):
        if node.op == "call_function" and not node.users and \
                str(getattr(node.target, "__name__", "")).split(".")[0] in _CHECKS:
            graph.erase_node(node)
    graph.eliminate_dead_code()
    gm.recompile()
    if checks:
        print(f"fsdp_trace: note: the model checks its data at {', '.join(sorted(set(checks)))} "
              f"(torch._check_tensor_all); the plan does not run that check", file=sys.stderr)
    return gm
