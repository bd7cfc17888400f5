"""Tracing an nn.Module (forward plus loss) to an ATen-level torch.fx graph.

PyTorch 1.13 (Debian's): `make_fx` over `functionalize` (no in-place ops, no
views: `view_copy`, `t_copy`, ...), with the parameters and buffers passed in
through `functional_call`, so each is a graph input (a placeholder) rather
than a constant captured by value. A newer PyTorch's `torch.export` gives the
same kind of graph; `make_fx` is what both have.

What ONNX loses is kept here: each parameter's fully qualified name, the
module that owns it and the class of every module on the way down from the
root, which tensors are buffers, and which names share one tensor (tied
weights). Each node of the graph records the module path it was traced in.
"""
import contextlib
import inspect
import math
import os
import sys

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
try:  # torch.func.functional_call from 2.0; stateless's is deprecated there
    from torch.func import functional_call
except ImportError:  # pragma: no cover - PyTorch 1.13
    from torch.nn.utils.stateless import functional_call
from torch.utils._python_dispatch import TorchDispatchMode

try:  # torch 1.13's functorch; newer PyTorch has torch.func.functionalize
    from torch.func import functionalize
except ImportError:  # pragma: no cover - depends on the PyTorch version
    from functorch.experimental import functionalize

from . import checkpointing, flex_attention, statistics
from .mlir import TraceError
from .swap import swapped


class Tensor:
    """One parameter or buffer as the module holds it."""

    def __init__(self, name, tensor, module_path, classes, buffer):
        self.name = name            # the first FQN (the symbol)
        self.aliases = [name]       # every FQN naming this tensor (tied)
        self.tensor = tensor
        self.module_path = module_path
        self.classes = classes      # root's class first, the owner's last
        self.buffer = buffer


def module_tensors(module):
    """The module's parameters and buffers, one entry per distinct tensor, in
    state_dict order, each with every name it has."""
    classes = {}
    for path, m in module.named_modules(remove_duplicate=False):
        classes.setdefault(path, type(m).__name__)
    out, seen = [], {}
    for path, m in module.named_modules(remove_duplicate=False):
        chain = [classes[""]]
        parts = path.split(".") if path else []
        for i in range(len(parts)):
            chain.append(classes[".".join(parts[:i + 1])])
        for kind, table in (("param", m._parameters), ("buffer", m._buffers)):
            for local, t in table.items():
                if t is None:
                    continue
                fqn = f"{path}.{local}" if path else local
                if id(t) in seen:
                    if fqn not in seen[id(t)].aliases:
                        seen[id(t)].aliases.append(fqn)
                    continue
                entry = Tensor(fqn, t, path, chain, kind == "buffer")
                seen[id(t)] = entry
                out.append(entry)
    return out


class _OnMeta(TorchDispatchMode):
    """Every tensor created while active is made on the meta device (no
    storage): a module built or traced under it holds shapes only. While
    tracing (`mixed`), a CPU tensor an op meets beside meta ones (a constant
    with data, see _constants_with_data) is taken to meta for that op only:
    the graph still records the constant."""

    def __init__(self, mixed=False):
        super().__init__()
        self.mixed = mixed

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cpu":
            kwargs["device"] = torch.device("meta")
        if self.mixed:
            flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
            if any(isinstance(a, torch.Tensor) and a.is_meta for a in flat):
                flat = [a.to("meta") if isinstance(a, torch.Tensor) and not a.is_meta
                        else a for a in flat]
                args, kwargs = torch.utils._pytree.tree_unflatten(flat, spec)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _constants_with_data():
    """torch.tensor(data, device=meta) (Tensor.__rpow__ makes one for
    `10000 ** x`) made on the CPU instead, so the traced graph keeps its
    value."""
    originals = torch.tensor, torch.as_tensor

    def on_cpu(make):
        def wrapped(data, *args, **kwargs):
            device = kwargs.get("device")
            if device is not None and torch.device(device).type == "meta":
                kwargs["device"] = "cpu"
            return make(data, *args, **kwargs)
        return wrapped
    torch.tensor, torch.as_tensor = on_cpu(originals[0]), on_cpu(originals[1])
    try:
        yield
    finally:
        torch.tensor, torch.as_tensor = originals


@contextlib.contextmanager
def _dropout_as_one_op():
    """F.dropout (nn.Dropout's) traced as aten.native_dropout, one op, which
    fsdp lowers to fsdp.dropout: on the CPU, PyTorch writes it as
    bernoulli_ and a multiplication, a random op with no fsdp form. The
    channel dropouts (dropout1d/2d/3d: one draw per sample and channel) and
    the alpha dropouts (SELU's: dropped elements set to the negative
    saturation, then an affine that keeps the mean and variance) are the
    same op drawn over a [N, C, 1, ...] (or the input's) shape of ones
    shaped from the input, then PyTorch's own arithmetic; so is torchvision's
    stochastic depth (a residual branch dropped per sample or per batch:
    Swin, ConvNeXt, EfficientNet)."""
    import torch.nn.functional as F
    names = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
             "feature_alpha_dropout")
    originals = {n: getattr(F, n) for n in names if hasattr(F, n)}
    torch_originals = torch.dropout, torch.alpha_dropout, torch.feature_alpha_dropout
    alpha = 1.7580993408473766  # SELU's negative saturation, as ATen's

    def keep(input, p, shape):
        # 1 where kept, 0 where dropped: fsdp.dropout of ones, unscaled.
        ones = torch.ones_like(input[tuple(slice(0, n) for n in shape)])
        return torch.ops.aten.native_dropout(ones, float(p), True)[0] * (1 - p)

    def channel_shape(input, spatial):
        # (N, C, 1, ...) for a batched input, (C, 1, ...) for an unbatched one.
        batched = input.dim() == spatial + 2
        lead = 2 if batched else 1
        return tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        return torch.ops.aten.native_dropout(input, float(p), True)[0]

    def channel(spatial):
        def f(input, p=0.5, training=True, inplace=False):
            if not training or p == 0:
                return input
            if p == 1:
                return input * 0
            return input * (keep(input, p, channel_shape(input, spatial)) / (1 - p))
        return f

    def alpha_dropout(feature):
        def f(input, p=0.5, training=False, inplace=False):
            if not training or p == 0:
                return input
            if p == 1:  # ATen's answer for every dropout at p = 1
                return input * 0
            shape = channel_shape(input, input.dim() - 2) if feature else tuple(input.shape)
            k = keep(input, p, shape)
            a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
            return input * (k * a) + ((k - 1) * (alpha * a) + alpha * a * p)
        return f
    replaced = {"dropout": dropout, "dropout1d": channel(1), "dropout2d": channel(2),
                "dropout3d": channel(3), "alpha_dropout": alpha_dropout(False),
                "feature_alpha_dropout": alpha_dropout(True)}

    def stochastic_depth(input, p, mode, training=True):
        # torchvision.ops.stochastic_depth: a residual branch dropped per
        # sample ("row") or for the whole batch ("batch"), scaled 1/(1-p).
        if not training or p == 0.0:
            return input
        if mode not in ("row", "batch"):
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        if p == 1.0:
            return input * 0
        shape = ((input.shape[0],) if mode == "row" else (1,)) + (1,) * (input.dim() - 1)
        return input * (keep(input, p, shape) / (1 - p))
    depth = sys.modules.get("torchvision.ops.stochastic_depth")
    depth_original = getattr(depth, "stochastic_depth", None)
    if depth_original is not None:
        depth.stochastic_depth = stochastic_depth
    for n in originals:
        setattr(F, n, replaced[n])
    torch.dropout = lambda input, p, train: dropout(input, p, train)
    torch.alpha_dropout = lambda input, p, train: replaced["alpha_dropout"](input, p, train)
    torch.feature_alpha_dropout = \
        lambda input, p, train: replaced["feature_alpha_dropout"](input, p, train)
    try:
        yield
    finally:
        if depth_original is not None:
            depth.stochastic_depth = depth_original
        for n, f in originals.items():
            setattr(F, n, f)
        torch.dropout, torch.alpha_dropout, torch.feature_alpha_dropout = torch_originals


@contextlib.contextmanager
def meta_device():
    """Build a model inside `with fsdp_trace.meta_device():` and its weights
    are never allocated (a 70B-parameter model on a laptop):

        with fsdp_trace.meta_device():
            model = Transformer(config)
    """
    with _OnMeta():
        yield


@contextlib.contextmanager
def _rnn_weights_traced(module):
    """nn.RNN, nn.LSTM and nn.GRU read their weights through a list they
    build once (`_flat_weights`), not through the attributes
    functional_call swaps: traced as they are, the module's own tensors
    became constants and the weights were never trained. Each call rebuilds
    the list from the attributes in force (the traced ones), and on the way
    out from the module's own."""
    def refresh(mod, *_):
        mod._flat_weights = [getattr(mod, n) if hasattr(mod, n) else None
                             for n in mod._flat_weights_names]
    rnns = [m for m in module.modules() if isinstance(m, torch.nn.RNNBase)]
    handles = [m.register_forward_pre_hook(refresh) for m in rnns]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        for m in rnns:
            refresh(m)


def _parameters_read_as_constants(gm, module):
    """Names of the module's parameters the trace reads as constants
    (get_attr of the very tensor) instead of through their inputs: a module
    that caches its weights where functional_call cannot swap them. Such a
    parameter would get no gradient and never train."""
    own = {}
    for name, p in module.named_parameters():
        if p.numel():
            own.setdefault(p.data_ptr(), name)
    found = []
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        t = getattr(gm, node.target, None)
        if isinstance(t, torch.Tensor) and not t.is_meta and t.numel() \
                and t.data_ptr() in own and node.users \
                and own[t.data_ptr()] not in found:
            found.append(own[t.data_ptr()])
    return found


@contextlib.contextmanager
def _module_paths(module):
    """Records in each fx node created meanwhile the module path it was
    created in (`node.meta["module_path"]`)."""
    names = {id(m): p for p, m in module.named_modules(remove_duplicate=False)}
    stack = [""]
    handles = []
    def enter(mod, _inputs):
        stack.append(names.get(id(mod), stack[-1]))

    def leave(mod, _inputs, _output):
        stack.pop()
    for m in module.modules():
        handles.append(m.register_forward_pre_hook(enter))
        handles.append(m.register_forward_hook(leave))
    original = torch.fx.Graph.create_node

    def create_node(graph, *args, **kwargs):
        node = original(graph, *args, **kwargs)
        node.meta["module_path"] = stack[-1]
        return node
    torch.fx.Graph.create_node = create_node
    try:
        yield stack
    finally:
        torch.fx.Graph.create_node = original
        for h in handles:
            h.remove()


def input_names(module, example_inputs):
    """Names and tensors of the example inputs: a dict as given, or a tuple
    named after forward's parameters."""
    if isinstance(example_inputs, dict):
        return list(example_inputs.items())
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    params = [p.name for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = []
    for i, t in enumerate(example_inputs):
        names.append(params[i] if i < len(params) else f"input{i}")
    return list(zip(names, example_inputs))


def _decompositions():
    """PyTorch's own decompositions (torch._decomp, into other ATen ops) of
    the ATen ops fsdp has no lowering of: elu, hardtanh, leaky_relu, stack,
    flip, roll, logsumexp, var, the smooth-L1 and margin losses, ... are
    traced as the ops they are made of. Never a random op's (a draw must
    stay visible to be refused), and not the reference implementations of
    torch._refs, which are written in prims ops fsdp does not lower. Ops
    PyTorch has none of (grid_sampler_3d) are aten_decompositions'."""
    from torch._decomp import decomposition_table
    from . import aten_decompositions
    from .lower import LOWERINGS, SPLATS, is_random, op_name
    table = {op: fn for op, fn in decomposition_table.items()
             if getattr(fn, "__module__", "").startswith("torch._decomp")
             and op_name(op) not in LOWERINGS and op_name(op) not in SPLATS
             and not is_random(op)}
    table.update(aten_decompositions.TABLE)
    return table


CONSTANT_LIMIT = 1 << 16  # elements make_fx keeps a traced constant's value for


def _make_fx_with_constants(fn):
    """make_fx, with the values it propagates as constants (those built
    from torch.tensor data in forward) kept up to 65,536 elements, not 1:
    `.item()` or `int()` of such a value (a lengths table, the largest
    position) is computed at trace time. A value that depends on the data
    still cannot be read; trace() says so."""
    from torch.fx.experimental import proxy_tensor
    traced = make_fx(fn, decomposition_table=_decompositions())

    def run(*args):
        saved = getattr(proxy_tensor, "CONSTANT_NUMEL_LIMIT", None)
        if saved is not None:
            proxy_tensor.CONSTANT_NUMEL_LIMIT = max(saved, CONSTANT_LIMIT)
        try:
            return traced(*args)
        finally:
            if saved is not None:
                proxy_tensor.CONSTANT_NUMEL_LIMIT = saved
    return run


def _traced_value(t):
    """The tensor under functionalize's wrapper (whose own storage is not
    allocated), where make_fx keeps a constant's value."""
    if hasattr(torch, "_is_functional_tensor") and torch._is_functional_tensor(t):
        torch._sync(t)
        return torch._from_functional_tensor(t)
    return t


def _user_line(error):
    """' at FILE:LINE `code`' for the innermost frame of `error`'s traceback
    outside PyTorch and this package: the model's line that read the
    value (or called the PyTorch function that did, e.g. torch.istft)."""
    import traceback
    return model_line((f.filename, f.lineno, f.line)
                      for f in traceback.extract_tb(error.__traceback__))


def model_line(frames):
    """' at FILE:LINE `code`' for the innermost of `frames` ((file, line,
    code), outermost first) outside PyTorch and this package; "" if none."""
    skip = [os.path.dirname(torch.__file__)]
    try:  # 1.13's functionalize lives in functorch
        import functorch
        skip.append(os.path.dirname(functorch.__file__))
    except ImportError:
        pass
    skip = tuple(os.path.abspath(d) + os.sep for d in skip)
    here = os.path.dirname(os.path.abspath(__file__))
    found = ""
    for filename, lineno, code in frames:
        if filename.startswith("<"):  # code made at run time (fx, exec)
            continue
        name = os.path.abspath(filename)
        if name.startswith(skip + (here,)) or "contextlib" in name:
            continue
        found = f" at {os.path.basename(name)}:{lineno} `{(code or '').strip()[:72]}`"
    return found


# Python's and numpy's random draws (module-level functions): invisible to
# a trace, a value drawn by one while the step is traced is a constant of
# the plan, the same at every step.
HOST_RANDOM = {
    "random": "random uniform randint randrange choice choices shuffle sample gauss "
              "normalvariate betavariate expovariate triangular getrandbits",
    "numpy.random": "rand randn random random_sample ranf sample uniform randint "
                    "random_integers choice permutation shuffle normal binomial "
                    "poisson beta gamma exponential geometric multinomial bytes",
}


@contextlib.contextmanager
def _host_draws(draws):
    """Records in `draws` every call of a HOST_RANDOM function made while
    the step is traced, as 'module.function at FILE:LINE `code`' for the
    caller (the model's line)."""
    import importlib
    import linecache
    # PyTorch's own draws while it traces (none known; a port, a name) are
    # not the model's.
    inside = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
              os.path.dirname(os.path.abspath(__file__)) + os.sep)
    saved = []
    for module_name, names in HOST_RANDOM.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names.split():
            original = getattr(module, name, None)
            if original is None:
                continue

            def watched(*args, __original=original, __name=f"{module_name}.{name}", **kwargs):
                caller = sys._getframe(1)
                where = caller.f_code.co_filename
                if not os.path.abspath(where).startswith(inside):
                    line = linecache.getline(where, caller.f_lineno).strip()[:72]
                    draws.append(f"{__name} at {os.path.basename(where)}:{caller.f_lineno} "
                                 f"`{line}`")
                return __original(*args, **kwargs)
            saved.append((module, name, original))
            setattr(module, name, watched)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


# PyTorch's functions that check their data in an `if` and raise: the
# torch function the check calls, and what it checks.
DATA_CHECKS = {"gaussian_nll_loss": ("any", "that var is not negative")}


@contextlib.contextmanager
def _data_checks_unrun():
    """torch.nn.functional's own checks of the data that raise on a bad
    value (gaussian_nll_loss: `if torch.any(var < 0): raise`) read a value
    no plan has before it runs. Called from such a function's own code
    (however the function was reached: OpInfo holds it, nn.GaussianNLLLoss
    looks it up), the check's torch function answers that the data passes;
    called from anywhere else, it is itself. The plan does not run the
    check, and a note on stderr says so."""
    import torch.nn.functional as F
    unrun = []
    by_check = {}
    for name, (check, what) in DATA_CHECKS.items():
        fn = getattr(F, name, None)
        if fn is not None and hasattr(torch, check):
            by_check.setdefault(check, {})[fn.__code__] = f"{name}'s check {what}"
    answers = {}
    for check, codes in by_check.items():
        real = getattr(torch, check)

        def answered(*args, __real=real, __codes=codes, **kwargs):
            what = __codes.get(sys._getframe(1).f_code)
            if what is None or kwargs or len(args) != 1:
                return __real(*args, **kwargs)
            unrun.append(what)
            return False
        answers[check] = answered
    try:
        with swapped(torch, answers):
            yield
    finally:
        if unrun:
            print(f"fsdp_trace: note: the plan does not run {'; '.join(sorted(set(unrun)))} "
                  f"(fsdp-run has no data checks)", file=sys.stderr)


class _NarrowAtTensorStart(torch.overrides.TorchFunctionMode):
    """torch.narrow with a tensor start (`x.narrow(0, start, n)`, start a
    0-dim tensor from the data) reads the start's value (.item()), which
    no plan has before it runs; its result's shape is fixed by `length`
    alone. Traced as an index_select of start + arange(length) (a negative
    start counted from the end, as narrow counts it). A start that leaves
    the tensor is an out-of-range index at run time."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.narrow, torch.Tensor.narrow):
            bound = dict(zip(("input", "dim", "start", "length"), args), **kwargs)
            start = bound.get("start")
            if isinstance(start, torch.Tensor) and start.numel() == 1 and \
                    not start.is_floating_point() and len(bound) == 4:
                x, dim = bound["input"], bound["dim"] % max(bound["input"].dim(), 1)
                first = start.reshape(()).long()
                first = torch.where(first < 0, first + x.shape[dim], first)
                index = first + torch.arange(bound["length"], device=x.device)
                return torch.index_select(x, dim, index)
        return func(*args, **kwargs)


FRONTENDS = ("auto", "export", "make_fx")


def capture(module, example_inputs, loss_fn=None, frontend="auto"):
    """_capture, refused where the model drew random numbers with Python's
    or numpy's generators while it was traced (HOST_RANDOM): Hugging Face's
    wav2vec2 family draws its SpecAugment time masks with numpy.random in
    training, and a mask drawn once would be applied at every step."""
    draws, checkpointed = [], []
    with _host_draws(draws), checkpointing.traced_through(checkpointed):
        result = _capture(module, example_inputs, loss_fn, frontend)
    result[0].meta["fsdp_checkpointed_calls"] = len(checkpointed)
    if draws:
        seen = list(dict.fromkeys(draws))
        raise TraceError(
            f"{type(module).__name__} draws random numbers outside PyTorch while it is "
            f"traced, which the plan would apply as one value at every step:\n  " +
            "\n  ".join(seen[:8]) + (f"\n  ... ({len(seen) - 8} more)" if len(seen) > 8 else "") +
            "\n(turn the random feature off for tracing, e.g. a wav2vec2 config's "
            "mask_time_prob=0 and mask_feature_prob=0, or trace in eval mode, train=False)")
    return result


def _capture(module, example_inputs, loss_fn=None, frontend="auto"):
    """Traces `module` (forward, then `loss_fn(output, *rest)` on the inputs
    forward does not take) into an ATen graph.

    `frontend`: "export" (torch.export, PyTorch 2.3+), "make_fx" (make_fx
    over functionalize, every PyTorch since 1.13), or "auto": torch.export
    where this PyTorch has it, and make_fx where it has not or where export
    cannot take the model (a value read at trace time, as `.item()` of an
    integer buffer: make_fx computes it from the buffer, export refuses).

    Returns (graph_module, tensors, inputs, used): `tensors` the parameters
    and buffers in placeholder order, `inputs` the (name, tensor) pairs of
    the data inputs in placeholder order after them, `used` the frontend
    that traced it and why ("export", or "make_fx" with export's error)."""
    if frontend not in FRONTENDS:
        raise TraceError(f"frontend '{frontend}' is not one of {', '.join(FRONTENDS)}")
    tensors = module_tensors(module)
    inputs = input_names(module, example_inputs)
    for name, t in inputs:
        if not isinstance(t, torch.Tensor):
            raise TraceError(f"input '{name}' is a {type(t).__name__}, not a tensor")
    # Narrower integer inputs (int32 token ids, uint8 pixels) are traced as
    # int64, the one integer type the step computes in: the same values
    # (fsdp-run widens an archive's <i4, <i2, <u2, |i1 and |u1 arrays).
    inputs = [(n, t.long() if not t.dtype.is_floating_point and t.dtype != torch.bool
               and t.dtype != torch.int64 and not t.is_complex() else t) for n, t in inputs]
    sig = inspect.signature(module.forward).parameters
    takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig.values())
    forward_args = [n for n, _ in inputs if n in sig or takes_kwargs]
    rest = [n for n, _ in inputs if n not in forward_args]
    if isinstance(example_inputs, (tuple, list)) and loss_fn is None:
        forward_args, rest = [n for n, _ in inputs], []
    if rest and loss_fn is None:
        raise TraceError(f"inputs {rest} are not parameters of "
                         f"{type(module).__name__}.forward and no loss_fn takes them")
    names = [n for n, _ in inputs]
    positional = isinstance(example_inputs, (tuple, list, torch.Tensor))
    meta = any(e.tensor.is_meta for e in tensors)
    data = [t.to("meta") if meta else t for _, t in inputs]

    from . import export
    if frontend == "export" and not export.available():
        raise TraceError(f"frontend 'export': PyTorch {torch.__version__} has no "
                         f"torch.export with non-strict capture (2.3 or newer)")
    why = None
    if frontend != "make_fx" and export.available():
        @contextlib.contextmanager
        def contexts():
            with _dropout_as_one_op(), _rnn_weights_traced(module), _data_checks_unrun(), \
                    _NarrowAtTensorStart(), statistics.StatisticsAsOps(), flex_attention.as_ops(), (_OnMeta(mixed=True) if meta else contextlib.nullcontext()), \
                    (_constants_with_data() if meta else contextlib.nullcontext()):
                yield
        try:
            gm = export.capture_export(module, tensors, list(zip(names, data)), forward_args,
                                       rest, positional, loss_fn, contexts)
        except TraceError:
            raise
        except Exception as e:  # noqa: BLE001 - any export failure: make_fx may take it
            if frontend == "export":
                raise TraceError(f"torch.export could not capture {type(module).__name__}: "
                                 f"{_first_line(e)}") from e
            why = _first_line(e)
        else:
            _refuse_frozen(gm, module)
            return gm, tensors, inputs, ("export", None)

    modules = dict(module.named_modules(remove_duplicate=False))
    # Integer and boolean buffers read as values (a lengths table's .item())
    # are traced as constants, on a second attempt only: a first trace that
    # needs no value keeps them as buffers. Batch norm's step counter, and
    # any buffer forward updates, must stay one: its value changes.
    as_constants = [False]
    made = []  # (name, owner, local name, constant, its value)

    def constant_buffer(entry):
        return (as_constants[0] and entry.buffer and not entry.tensor.is_meta
                and not entry.tensor.dtype.is_floating_point
                and entry.tensor.numel() <= CONSTANT_LIMIT
                and not isinstance(modules.get(entry.module_path),
                                   torch.nn.modules.batchnorm._BatchNorm))

    def check_unchanged(_module, _inputs, _output):
        for name, owner, local, value, original in made:
            now = getattr(owner, local, None)
            try:  # a constant's value is known while tracing
                changed = now is None or _traced_value(now).tolist() != original
            except RuntimeError:  # it now depends on the data
                changed = True
            if changed:
                raise TraceError(
                    f"forward updates the integer buffer '{name}' and reads its value "
                    f"(.item(), int(), a tensor in an `if`): a plan is fixed before it "
                    f"runs, and a value that changes from step to step cannot be")

    def step(params, *data):
        state = {}
        made.clear()
        for entry, value in zip(tensors, params):
            if constant_buffer(entry):
                # Built as torch.tensor data, which make_fx propagates, so
                # `.item()` or `.max()` of it is computed at trace time.
                held = entry.tensor.tolist()
                value = torch.tensor(held, dtype=entry.tensor.dtype)
                local = entry.aliases[0].rsplit(".", 1)[-1]
                made.append((entry.aliases[0], modules.get(entry.module_path), local,
                             value, held))
            for alias in entry.aliases:
                state[alias] = value
        values = dict(zip(names, data))
        hook = module.register_forward_hook(check_unchanged)
        try:
            if positional:
                out = functional_call(
                    module, state, tuple(values[n] for n in forward_args))
            else:
                out = functional_call(
                    module, state, (), {n: values[n] for n in forward_args})
        finally:
            hook.remove()
        if loss_fn is not None:
            out = loss_fn(out, *(values[n] for n in rest))
        return out

    context = _OnMeta(mixed=True) if meta else contextlib.nullcontext()
    with _module_paths(module) as where, context, _dropout_as_one_op(), \
            _rnn_weights_traced(module), _data_checks_unrun(), _NarrowAtTensorStart(), \
            statistics.StatisticsAsOps(), flex_attention.as_ops(), (_constants_with_data() if meta else contextlib.nullcontext()):
        # Fresh tensor objects: the trace leaves nothing on the module's
        # own, and buffers are copies, so the forward traced (batch norm's
        # running statistics) does not move the module's state.
        def attempt():
            return _make_fx_with_constants(functionalize(step, remove="mutations_and_views"))(
                [e.tensor.detach().clone() if e.buffer else e.tensor.detach()
                 for e in tensors], *data)
        try:
            try:
                gm = attempt()
            except RuntimeError as e:
                if "value out of a tracing tensor" not in str(e) or not any(
                        t.buffer and not t.tensor.dtype.is_floating_point for t in tensors):
                    raise
                as_constants[0] = True
                del where[1:]
                gm = attempt()
        except RuntimeError as e:
            # 1.13's functionalize meets a value read (.item(), a tensor of
            # split points) either way.
            if ("value out of a tracing tensor" not in str(e)
                    and "data is not allocated yet" not in str(e)):
                raise
            path = where[-1] or "<root>"
            owner = modules.get(where[-1], module)
            raise TraceError(
                f"{path} ({type(owner).__name__}): forward reads the value of a tensor "
                f"computed from the step's inputs or parameters (.item(), int(), .tolist(), "
                f"a tensor in an `if`){_user_line(e)}; a plan is fixed before it runs, so "
                f"such a value must come from constants or be passed in as a Python "
                f"number") from None
    gm.graph.eliminate_dead_code()
    _refuse_frozen(gm, module)
    return gm, tensors, inputs, ("make_fx", why)


def _first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def _refuse_frozen(gm, module):
    frozen = _parameters_read_as_constants(gm, module)
    if frozen:
        raise TraceError(
            f"{len(frozen)} parameter(s) of {type(module).__name__} are read as constants, not "
            f"as parameters (the module keeps its own reference to them, where the "
            f"tracer cannot substitute the traced ones), so they would never train: "
            + ", ".join(frozen[:8]) + (" ..." if len(frozen) > 8 else ""))
