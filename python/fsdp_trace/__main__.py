"""python3 -m fsdp_trace MODULE:FACTORY [--args K=V ...] -o model.mlir

FACTORY (a callable in the importable MODULE, a file path works too) is
called with the --args (Python literals) and returns the model and its
example inputs: `(module, inputs)` or `(module, inputs, loss_fn)`, inputs a
dict name -> tensor (or a tuple in forward's order). The model is traced in
training mode, forward and loss together; the MLIR text goes to -o and the
weights beside it (model.safetensors), unless the model was built on the
meta device (`--meta` builds it there: shapes only, nothing allocated).
"""
import argparse
import ast
import importlib
import importlib.util
import os
import sys

from . import TraceError, meta_device, trace


def load(spec):
    mod, _, attr = spec.rpartition(":")
    if not mod or not attr:
        raise TraceError(f"'{spec}': expected MODULE:FACTORY")
    if mod.endswith(".py") or os.sep in mod:
        s = importlib.util.spec_from_file_location(os.path.basename(mod)[:-3], mod)
        if s is None:
            raise TraceError(f"'{mod}': not a Python file")
        m = importlib.util.module_from_spec(s)
        sys.modules[s.name] = m
        s.loader.exec_module(m)
    else:
        sys.path.insert(0, os.getcwd())
        m = importlib.import_module(mod)
    if not hasattr(m, attr):
        raise TraceError(f"'{mod}' has no '{attr}'")
    return getattr(m, attr)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m fsdp_trace", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", help="MODULE:FACTORY")
    p.add_argument("--args", nargs="*", default=[], metavar="K=V",
                   help="keyword arguments of the factory (Python literals)")
    p.add_argument("-o", "--output", required=True, help="the MLIR file to write")
    p.add_argument("--weights", help="where the weights go (default: OUTPUT's stem"
                   " + .safetensors)")
    p.add_argument("--meta", action="store_true",
                   help="build the model on the meta device: no weights")
    p.add_argument("--eval", action="store_true", help="trace in eval mode")
    a = p.parse_args(argv)
    try:
        kwargs = {}
        for kv in a.args:
            k, sep, v = kv.partition("=")
            if not sep:
                raise TraceError(f"--args {kv}: expected K=V")
            try:
                kwargs[k] = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                kwargs[k] = v
        factory = load(a.factory)
        if a.meta:
            with meta_device():
                made = factory(**kwargs)
        else:
            made = factory(**kwargs)
        if not isinstance(made, tuple) or len(made) not in (2, 3):
            raise TraceError(f"{a.factory} returned {type(made).__name__}; expected "
                             f"(module, inputs) or (module, inputs, loss_fn)")
        traced = trace(*made, train=not a.eval)
        weights = traced.save(a.output, a.weights)
        print(f"fsdp_trace: wrote {a.output}" + (f" and {weights}" if weights else
                                                   " (meta device: no weights)"))
    except TraceError as e:
        print(f"fsdp_trace: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
